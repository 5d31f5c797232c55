# bash completion for motion-monitor.
# Install: source it from ~/.bashrc, or copy it to /usr/share/bash-completion/completions/motion-monitor.
_motion_monitor() {
    local cur prev
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    case "$prev" in
        --sensor) COMPREPLY=($(compgen -W "accelerometer gyroscope magnetometer motion all" -- "$cur")); return ;;
        --reference-frame) COMPREPLY=($(compgen -W "arbitrary corrected north" -- "$cur")); return ;;
        --mode) COMPREPLY=($(compgen -W "auto buffered polled" -- "$cur")); return ;;
        --uri) COMPREPLY=($(compgen -W "local: ip:" -- "$cur")); return ;;
        --device)
            # The devices with motion sensors, by id, label and driver name, read from sysfs.
            local d words=""
            for d in /sys/bus/iio/devices/iio:device*; do
                [ -e "$d" ] || continue
                words+=" ${d##*/}"
                [ -r "$d/label" ] && words+=" $(cat "$d/label" 2>/dev/null)"
                [ -r "$d/name" ] && words+=" $(cat "$d/name" 2>/dev/null)"
            done
            COMPREPLY=($(compgen -W "$words" -- "$cur")); return ;;
        --csv) COMPREPLY=($(compgen -f -- "$cur") $(compgen -W "-" -- "$cur")); compopt -o filenames; return ;;
        --interval|--rate|--count|--duration) return ;;
    esac
    COMPREPLY=($(compgen -W "--list --once --json --si --uri --device --sensor --reference-frame --interval --rate --count
        --duration --mode --csv --force --append --quiet --no-color --verbose --help --version" -- "$cur"))
}
complete -F _motion_monitor motion-monitor
