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
        --csv-rotate) COMPREPLY=($(compgen -W "daily 10M 100M 1G" -- "$cur")); return ;;
        --sighup) COMPREPLY=($(compgen -W "end reopen" -- "$cur")); return ;;
        --keep) return ;;
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
        --mqtt-format) COMPREPLY=($(compgen -W "json influx" -- "$cur")); return ;;
        --mqtt-ca-file|--mqtt-cert|--mqtt-key|--mqtt-spool) COMPREPLY=($(compgen -f -- "$cur")); compopt -o filenames; return ;;
        --mqtt) COMPREPLY=($(compgen -W "mqtt:// mqtts://" -- "$cur")); compopt -o nospace; return ;;
        --interval|--rate|--count|--duration|--board) return ;;
    esac
    COMPREPLY=($(compgen -W "--list --once --json --si --uri --device --sensor --reference-frame --interval --rate --count
        --duration --mode --csv --force --append --csv-rotate --keep --sighup --wait-for-device --uncalibrated --quiet --no-color --verbose --help --version --mqtt --board
        --mqtt-format --mqtt-ca-file --mqtt-cert --mqtt-key --mqtt-spool --mqtt-require" -- "$cur"))
}
complete -F _motion_monitor motion-monitor
