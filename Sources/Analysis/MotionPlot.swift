import Media

// The SVG plot of an analysis: the score against the threshold, the events, the noise, the
// share the dynamic background auto-masked.

/// The SVG plot of an analysis: readable in any browser, no other tool needed.
///
/// Top panel: the score (fraction of the watched picture that changed, log scale) against
/// time, the threshold, the events shaded, light switches marked, and how high the score goes
/// with nothing happening. Middle panel: the measured noise and the pixel threshold derived
/// from it, in grey levels. Bottom panel: the share of the watched picture the dynamic
/// background auto-masked (parts that count only when much of them changes at once). Long inputs are reduced to at most `maximumPoints` points per line,
/// each the maximum of its time bucket, so short spikes stay visible.
extension MotionAnalysis {
    public static let maximumPoints = 2000

    /// The plot as an SVG document. `title` names the source (it is escaped).
    public func svg(title: String) -> String {
        var plot = SVGPlot(analysis: self)
        return plot.render(title: title)
    }
}

struct SVGPlot {
    let analysis: MotionAnalysis
    var out = ""

    // Layout, in SVG user units.
    let width = 1000.0
    let height = 760.0
    let left = 90.0
    let right = 970.0
    let scoreTop = 80.0
    let scoreBottom = 370.0
    let noiseTop = 410.0
    let noiseBottom = 520.0
    let maskTop = 560.0
    let maskBottom = 650.0

    init(analysis: MotionAnalysis) {
        self.analysis = analysis
    }

    struct Bucket {
        var time: Double
        var score: Double
        var threshold: Double
        var noise: Double
        var pixelThreshold: Double
        var lightSwitch: Bool
        var autoMasked: Double
    }

    /// Per-bucket maxima over time (one bucket per frame for short inputs).
    func buckets() -> [Bucket] {
        let frames = analysis.frames
        guard !frames.isEmpty else { return [] }
        let count = min(frames.count, MotionAnalysis.maximumPoints)
        if count == frames.count {
            return frames.map {
                Bucket(
                    time: $0.time, score: Double($0.score), threshold: Double($0.threshold),
                    noise: Double($0.noise), pixelThreshold: Double($0.pixelThreshold),
                    lightSwitch: $0.lightSwitch, autoMasked: Double($0.autoMasked))
            }
        }
        let duration = max(analysis.duration, 1e-9)
        var result = [Bucket?](repeating: nil, count: count)
        for f in frames {
            let i = min(count - 1, max(0, Int(f.time / duration * Double(count))))
            let centre = (Double(i) + 0.5) * duration / Double(count)
            if var b = result[i] {
                b.score = max(b.score, Double(f.score))
                b.threshold = max(b.threshold, Double(f.threshold))
                b.noise = max(b.noise, Double(f.noise))
                b.pixelThreshold = max(b.pixelThreshold, Double(f.pixelThreshold))
                b.lightSwitch = b.lightSwitch || f.lightSwitch
                b.autoMasked = max(b.autoMasked, Double(f.autoMasked))
                result[i] = b
            } else {
                result[i] = Bucket(
                    time: centre, score: Double(f.score), threshold: Double(f.threshold),
                    noise: Double(f.noise), pixelThreshold: Double(f.pixelThreshold), lightSwitch: f.lightSwitch,
                    autoMasked: Double(f.autoMasked))
            }
        }
        return result.compactMap { $0 }
    }

    static func n(_ v: Double) -> String { DecimalText.short(v, 1) }

    func percent(_ fraction: Double) -> String {
        let p = fraction * 100
        return DecimalText.significant(p, 3) + "%"
    }

    mutating func line(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, _ style: String) {
        out += "<line x1=\"\(Self.n(x1))\" y1=\"\(Self.n(y1))\" x2=\"\(Self.n(x2))\" y2=\"\(Self.n(y2))\" \(style)/>\n"
    }

    mutating func text(_ x: Double, _ y: Double, _ content: String, _ attributes: String = "") {
        out +=
            "<text x=\"\(Self.n(x))\" y=\"\(Self.n(y))\"\(attributes.isEmpty ? "" : " " + attributes)>\(MarkupText.escaped(content))</text>\n"
    }

    mutating func polyline(_ points: [(Double, Double)], _ style: String) {
        guard !points.isEmpty else { return }
        out += "<polyline fill=\"none\" \(style) points=\""
        var first = true
        for (x, y) in points {
            if !first { out += " " }
            out += Self.n(x) + "," + Self.n(y)
            first = false
        }
        out += "\"/>\n"
    }

    mutating func render(title: String) -> String {
        let data = buckets()
        let duration = max(analysis.duration, 0.001)
        func x(_ t: Double) -> Double { left + (right - left) * min(max(t / duration, 0), 1) }

        // Score axis: decades from below the threshold (and 0.01 %) up to above the peak.
        let maxScore = data.reduce(0) { max($0, $1.score) }
        let threshold = analysis.settings.threshold
        let topDecade = min(0, Int(Numerics.log10(max(maxScore, threshold * 2, 1e-3)).rounded(.up)))
        let bottomDecade = min(-4, Int(Numerics.log10(threshold).rounded(.down)) - 1)
        let logTop = Double(topDecade), logBottom = Double(bottomDecade)
        func yScore(_ s: Double) -> Double {
            let l = s > 0 ? min(max(Numerics.log10(s), logBottom), logTop) : logBottom
            return scoreBottom - (scoreBottom - scoreTop) * (l - logBottom) / (logTop - logBottom)
        }
        // Noise axis: grey levels from 0 to a little above the highest line.
        let noiseMax = data.reduce(0) { max($0, $1.noise, $1.pixelThreshold) }
        let noiseStep = Numerics.niceStep(max(noiseMax, 1) * 1.15 / 4)
        let noiseTopValue = noiseStep * (max(noiseMax, 1) * 1.15 / noiseStep).rounded(.up)
        func yNoise(_ v: Double) -> Double {
            noiseBottom - (noiseBottom - noiseTop) * min(max(v / noiseTopValue, 0), 1)
        }
        func yMask(_ share: Double) -> Double { maskBottom - (maskBottom - maskTop) * min(max(share, 0), 1) }

        out = ""
        out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        out +=
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Self.n(width))\" height=\"\(Self.n(height))\" "
            + "viewBox=\"0 0 \(Self.n(width)) \(Self.n(height))\" font-family=\"sans-serif\" font-size=\"12\">\n"
        out += "<title>\(MarkupText.escaped("vigil analyze: " + title))</title>\n"
        out += "<rect x=\"0\" y=\"0\" width=\"\(Self.n(width))\" height=\"\(Self.n(height))\" fill=\"white\"/>\n"
        text(left, 24, "Motion score — " + title, "font-size=\"16\" font-weight=\"bold\"")
        let size = analysis.detectWidth > 0 ? " at \(analysis.detectWidth)×\(analysis.detectHeight)" : ""
        text(
            left, 44,
            "\(analysis.frames.count) frames, \(DecimalText.fixed(duration, 1)) s, \(analysis.events.count) events · "
                + "threshold \(percent(threshold)) · noise σ \(DecimalText.fixed(analysis.medianNoise, 2)) grey levels\(size) · "
                + "pixel threshold \(DecimalText.fixed(analysis.medianPixelThreshold, 2)) · "
                + "idle score (99th percentile) \(percent(analysis.idleScore99))", "fill=\"#333\"")

        // Events, shaded across both panels.
        for event in analysis.events {
            let x1 = x(event.start), x2 = max(x(event.end), x(event.start) + 1)
            for (top, bottom) in [(scoreTop, scoreBottom), (noiseTop, noiseBottom), (maskTop, maskBottom)] {
                out +=
                    "<rect x=\"\(Self.n(x1))\" y=\"\(Self.n(top))\" width=\"\(Self.n(x2 - x1))\" "
                    + "height=\"\(Self.n(bottom - top))\" fill=\"#2ca02c\" fill-opacity=\"0.18\"/>\n"
            }
        }

        // Score panel: frame, decade grid and labels.
        out +=
            "<rect x=\"\(Self.n(left))\" y=\"\(Self.n(scoreTop))\" width=\"\(Self.n(right - left))\" "
            + "height=\"\(Self.n(scoreBottom - scoreTop))\" fill=\"none\" stroke=\"#444\"/>\n"
        for decade in bottomDecade...topDecade {
            let y = yScore(Numerics.pow10(decade))
            line(left, y, right, y, "stroke=\"#ddd\"")
            line(left - 5, y, left, y, "stroke=\"#444\"")
            let label = percent(Numerics.pow10(decade))
            text(left - 8, y + 4, decade == bottomDecade ? "≤" + label : label, "text-anchor=\"end\"")
        }
        text(
            24, (scoreTop + scoreBottom) / 2, "score: picture changed (log scale)",
            "text-anchor=\"middle\" transform=\"rotate(-90 24 \(Self.n((scoreTop + scoreBottom) / 2)))\"")

        // Noise panel: frame, grid and labels.
        out +=
            "<rect x=\"\(Self.n(left))\" y=\"\(Self.n(noiseTop))\" width=\"\(Self.n(right - left))\" "
            + "height=\"\(Self.n(noiseBottom - noiseTop))\" fill=\"none\" stroke=\"#444\"/>\n"
        var v = 0.0
        while v <= noiseTopValue + noiseStep / 2 {
            let y = yNoise(v)
            line(left, y, right, y, "stroke=\"#ddd\"")
            line(left - 5, y, left, y, "stroke=\"#444\"")
            text(left - 8, y + 4, DecimalText.short(v, 2), "text-anchor=\"end\"")
            v += noiseStep
        }
        text(
            24, (noiseTop + noiseBottom) / 2, "grey levels",
            "text-anchor=\"middle\" transform=\"rotate(-90 24 \(Self.n((noiseTop + noiseBottom) / 2)))\"")

        // Auto-mask panel: frame, grid and labels.
        out +=
            "<rect x=\"\(Self.n(left))\" y=\"\(Self.n(maskTop))\" width=\"\(Self.n(right - left))\" "
            + "height=\"\(Self.n(maskBottom - maskTop))\" fill=\"none\" stroke=\"#444\"/>\n"
        for share in [0.0, 0.5, 1.0] {
            let y = yMask(share)
            line(left, y, right, y, "stroke=\"#ddd\"")
            line(left - 5, y, left, y, "stroke=\"#444\"")
            text(left - 8, y + 4, percent(share), "text-anchor=\"end\"")
        }
        text(
            24, (maskTop + maskBottom) / 2, "masked",
            "text-anchor=\"middle\" transform=\"rotate(-90 24 \(Self.n((maskTop + maskBottom) / 2)))\"")

        // Time axis under the panels.
        let timeStep = Numerics.niceStep(duration / 10)
        var t = 0.0
        while t <= duration + timeStep * 1e-6 {
            let xt = x(t)
            line(xt, scoreBottom, xt, scoreBottom + 5, "stroke=\"#444\"")
            line(xt, noiseBottom, xt, noiseBottom + 5, "stroke=\"#444\"")
            line(xt, maskBottom, xt, maskBottom + 5, "stroke=\"#444\"")
            let decimals = timeStep >= 1 ? 0 : (timeStep >= 0.1 ? 1 : 2)
            text(xt, maskBottom + 19, DecimalText.fixed(t, decimals), "text-anchor=\"middle\"")
            text(xt, scoreBottom + 17, DecimalText.fixed(t, decimals), "text-anchor=\"middle\" fill=\"#666\"")
            t += timeStep
        }
        text((left + right) / 2, maskBottom + 38, "time (s) from the first frame", "text-anchor=\"middle\"")

        // Data lines.
        polyline(data.map { (x($0.time), yScore($0.score)) }, "stroke=\"#1f77b4\" stroke-width=\"1.2\"")
        polyline(
            data.map { (x($0.time), yScore($0.threshold)) },
            "stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"")
        let idle = analysis.idleScore99
        if idle > 0 {
            let y = yScore(idle)
            line(left, y, right, y, "stroke=\"#7f7f7f\" stroke-width=\"1\" stroke-dasharray=\"2 3\"")
        }
        for b in data where b.lightSwitch {
            let xs = x(b.time)
            out +=
                "<path d=\"M \(Self.n(xs - 5)) \(Self.n(scoreTop - 12)) L \(Self.n(xs + 5)) \(Self.n(scoreTop - 12)) "
                + "L \(Self.n(xs)) \(Self.n(scoreTop - 2)) Z\" fill=\"#ff7f0e\"/>\n"
        }
        polyline(data.map { (x($0.time), yNoise($0.noise)) }, "stroke=\"#9467bd\" stroke-width=\"1.5\"")
        polyline(
            data.map { (x($0.time), yNoise($0.pixelThreshold)) },
            "stroke=\"#ff7f0e\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"")
        text(
            left + 6, noiseTop - 6, "noise σ (picture − background) and the pixel threshold derived from it",
            "fill=\"#333\"")
        polyline(
            data.map { (x($0.time), yMask($0.autoMasked)) },
            "stroke=\"#8c564b\" stroke-width=\"1.5\"")
        text(
            left + 6, maskTop - 6,
            analysis.settings.dynamicBackground
                ? "share of the picture the dynamic background auto-masked (counts only when much of a part changes at once)"
                : "the dynamic background is off (motion.dynamic_background): nothing is auto-masked",
            "fill=\"#333\"")

        // Legend.
        let ly = height - 40
        var lx = left
        func entry(_ label: String, _ symbol: String) {
            out += symbol
            text(lx + 34, ly + 4, label)
            lx += 34 + Double(label.count) * 6.6 + 18
        }
        entry(
            "score",
            "<line x1=\"\(Self.n(lx))\" y1=\"\(Self.n(ly))\" x2=\"\(Self.n(lx + 28))\" y2=\"\(Self.n(ly))\" stroke=\"#1f77b4\" stroke-width=\"2\"/>\n"
        )
        entry(
            "threshold",
            "<line x1=\"\(Self.n(lx))\" y1=\"\(Self.n(ly))\" x2=\"\(Self.n(lx + 28))\" y2=\"\(Self.n(ly))\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n"
        )
        entry(
            "event",
            "<rect x=\"\(Self.n(lx))\" y=\"\(Self.n(ly - 6))\" width=\"28\" height=\"12\" fill=\"#2ca02c\" fill-opacity=\"0.18\"/>\n"
        )
        entry(
            "idle score, 99th percentile",
            "<line x1=\"\(Self.n(lx))\" y1=\"\(Self.n(ly))\" x2=\"\(Self.n(lx + 28))\" y2=\"\(Self.n(ly))\" stroke=\"#7f7f7f\" stroke-dasharray=\"2 3\"/>\n"
        )
        entry(
            "light switch",
            "<path d=\"M \(Self.n(lx + 9)) \(Self.n(ly - 5)) L \(Self.n(lx + 19)) \(Self.n(ly - 5)) L \(Self.n(lx + 14)) \(Self.n(ly + 5)) Z\" fill=\"#ff7f0e\"/>\n"
        )
        entry(
            "noise σ",
            "<line x1=\"\(Self.n(lx))\" y1=\"\(Self.n(ly))\" x2=\"\(Self.n(lx + 28))\" y2=\"\(Self.n(ly))\" stroke=\"#9467bd\" stroke-width=\"2\"/>\n"
        )
        entry(
            "pixel threshold",
            "<line x1=\"\(Self.n(lx))\" y1=\"\(Self.n(ly))\" x2=\"\(Self.n(lx + 28))\" y2=\"\(Self.n(ly))\" stroke=\"#ff7f0e\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n"
        )
        out += "</svg>\n"
        return out
    }
}
