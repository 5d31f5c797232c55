/// A ``PlotFigure`` as an SVG document: no library, text written directly.
///
/// Each panel is a `<g class="panel">` whose `data-` attributes give the value scale (the value at
/// `data-y-top` is `data-value-top`, at `data-y-bottom` `data-value-bottom`), so a reader can
/// turn the lines' coordinates back into values; each axis's line is one `<polyline class="x">`
/// (`y`, `z`) per unbroken stretch, coordinates in pixels with two decimals.
enum PlotSVG {
    static func document(_ f: PlotFigure) -> String {
        var out = ""
        out.reserveCapacity(64 * 1024)
        out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(f.width)\" height=\"\(f.height)\" viewBox=\"0 0 \(f.width) \(f.height)\" font-family=\"sans-serif\" font-size=\"12\">\n"
        out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        for p in f.panels {
            out += "<g class=\"panel\" data-title=\"\(escape(p.title))\" data-units=\"\(escape(p.units))\" data-rows=\"\(p.rows)\""
            out += " data-y-top=\"\(num(p.top))\" data-y-bottom=\"\(num(p.top + p.height))\""
            out += " data-value-top=\"\(p.valueTop)\" data-value-bottom=\"\(p.valueBottom)\">\n"
            let right = p.left + p.width, bottom = p.top + p.height
            // Title, units and the legend.
            out += "<text x=\"\(num(p.left))\" y=\"\(num(p.top - 12))\" font-size=\"14\" font-weight=\"bold\">\(escape(p.title))</text>\n"
            if !p.units.isEmpty {
                out += "<text x=\"\(num(p.left - 8))\" y=\"\(num(p.top - 12))\" text-anchor=\"end\">\(escape(p.units))</text>\n"
            }
            for axis in 0..<3 {
                out += "<text x=\"\(num(right - Double(3 - axis) * 24))\" y=\"\(num(p.top - 12))\" fill=\"\(color(axis))\" font-weight=\"bold\">\(PlotFigure.axisNames[axis])</text>\n"
            }
            // Gaps, shaded under everything else.
            for g in p.gaps {
                out += "<rect class=\"gap\" x=\"\(num(g.from))\" y=\"\(num(p.top))\" width=\"\(num(g.to - g.from))\" height=\"\(num(p.height))\" fill=\"#eeeeee\"/>\n"
            }
            // The grid and the scales.
            for t in p.valueTicks {
                out += "<line x1=\"\(num(p.left))\" y1=\"\(num(t.at))\" x2=\"\(num(right))\" y2=\"\(num(t.at))\" stroke=\"#dddddd\"/>\n"
                out += "<text x=\"\(num(p.left - 6))\" y=\"\(num(t.at + 4))\" text-anchor=\"end\">\(escape(t.label))</text>\n"
            }
            for t in p.timeTicks {
                out += "<line x1=\"\(num(t.at))\" y1=\"\(num(p.top))\" x2=\"\(num(t.at))\" y2=\"\(num(bottom))\" stroke=\"#eeeeee\"/>\n"
                out += "<text x=\"\(num(t.at))\" y=\"\(num(bottom + 16))\" text-anchor=\"middle\">\(escape(t.label))</text>\n"
            }
            out += "<text x=\"\(num(right))\" y=\"\(num(bottom + 32))\" text-anchor=\"end\">time (s)</text>\n"
            out += "<rect x=\"\(num(p.left))\" y=\"\(num(p.top))\" width=\"\(num(p.width))\" height=\"\(num(p.height))\" fill=\"none\" stroke=\"#888888\"/>\n"
            for run in p.runs {
                out += "<polyline class=\"\(PlotFigure.axisNames[run.axis])\" fill=\"none\" stroke=\"\(color(run.axis))\" stroke-width=\"1.2\" stroke-linejoin=\"round\" points=\""
                let points = run.points.count == 1 ? run.points + [PlotFigure.Point(x: run.points[0].x + 0.5, y: run.points[0].y)] : run.points
                for (i, pt) in points.enumerated() {
                    if i > 0 { out += " " }
                    out += num(pt.x)
                    out += ","
                    out += num(pt.y)
                }
                out += "\"/>\n"
            }
            out += "</g>\n"
        }
        out += "</svg>\n"
        return out
    }

    /// `#d62728`.
    static func color(_ axis: Int) -> String {
        let (r, g, b) = PlotFigure.axisColors[axis]
        func hex(_ v: UInt8) -> String { let s = String(v, radix: 16); return s.count == 1 ? "0" + s : s }
        return "#" + hex(r) + hex(g) + hex(b)
    }

    /// A coordinate with at most two decimals.
    static func num(_ v: Double) -> String {
        let n = Int64((v * 100).rounded())
        let whole = n / 100, fraction = abs(n % 100)
        let sign = n < 0 && whole == 0 ? "-" : ""
        if fraction == 0 { return sign + "\(whole)" }
        return sign + "\(whole)." + (fraction < 10 ? "0" : "") + "\(fraction)"
    }

    /// Text for an attribute or an element.
    static func escape(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default:
                // Control characters are not allowed in XML 1.0.
                if c.value < 0x20 && c != "\t" { out += "?" } else { out.unicodeScalars.append(c) }
            }
        }
        return out
    }
}
