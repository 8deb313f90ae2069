import Media
import Recorder

// The page at `/`: the camera live (the latest picture, when `snapshot.live_interval` keeps one,
// until the video starts) and
// the clips, newest first, day by day, each with its picture, its time, its length and what
// started it; a clip opens in the browser's own player, or downloads. Plain HTML and a little
// CSS, no script and nothing from elsewhere: readable on a phone.
extension WebSite {
    /// The page: the newest days' clips, at least one day and then whole days until about
    /// `clipsPerPage`, with a link to every day; or the clips of `day` (YYYY-MM-DD) alone.
    func page(day chosen: String? = nil) -> String {
        let items = records()
        let counters = context.counters
        let all = items.filter { !$0.deleted }
        // Each day and its clips, newest first (the journal's order reversed).
        var days: [(day: String, count: Int)] = []
        for (record, _) in all {
            let day = String(record.start.prefix(10))
            if days.last?.day == day { days[days.count - 1].count += 1 } else { days.append((day, 1)) }
        }
        var shown = Set<String>()
        if let chosen {
            shown = [chosen]
        } else {
            var count = 0
            for (day, n) in days {
                if !shown.isEmpty && count + n > Self.clipsPerPage { break }
                shown.insert(day)
                count += n
            }
        }
        let kept = all.filter { shown.contains(String($0.record.start.prefix(10))) }
        let queue = uploads()
        // What waits is said only while uploads run (not after upload.url was taken out).
        let uploading = context.uploadsIfRunning != nil
        var html = """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(MarkupText.escaped(camera)) — Vigil</title>
            <style>
            body { font: 16px/1.4 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 0 1rem; color: #222; }
            header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 0 1rem; }
            h1 { font-size: 1.4rem; margin: 1rem 0 0.5rem; }
            .now { color: #555; }
            .recording { color: #b00; font-weight: bold; }
            .live video { width: 100%; height: auto; border-radius: 4px; background: #222; }
            h2 { font-size: 1.1rem; border-bottom: 1px solid #ccc; margin-top: 1.5rem; }
            ul { list-style: none; padding: 0; display: grid; grid-template-columns: repeat(auto-fill, minmax(14rem, 1fr)); gap: 1rem; }
            li img { width: 100%; height: auto; aspect-ratio: 4 / 3; object-fit: cover; border-radius: 4px; background: #ddd; }
            .meta { font-size: 0.9rem; color: #444; }
            a { color: #05c; }
            .uploaded { color: #060; }
            .waiting { color: #850; }
            .failed { color: #b00; }
            .days { font-size: 0.9rem; color: #444; margin: 1rem 0; line-height: 1.8; }
            </style>
            </head>
            <body>
            <header><h1>\(MarkupText.escaped(camera))</h1>
            <p class="now">\(counters.recording ? "<span class=\"recording\">recording now</span>" : "watching") ·
            \(all.count) clip\(all.count == 1 ? "" : "s") · \(Self.freeSpace(counters.diskFreeBytes)) free</p></header>

            """
        // The live view: HLS where the browser plays it (Safari, phones), the progressive
        // stream elsewhere; the latest picture until it starts.
        let poster = storage.exists(ClipNaming.latestPicture) ? " poster=\"/latest.jpg\"" : ""
        html += """
            <figure class="live"><video id="live" controls autoplay muted playsinline\(poster) aria-label="The camera, live">
            <source src="/live.m3u8" type="application/vnd.apple.mpegurl">
            <source src="/live.mp4" type="video/mp4">
            </video></figure>

            """
        if days.count > 1 || chosen != nil {
            html += "<nav class=\"days\">"
            html += days.map { day, n in
                let label = "\(MarkupText.escaped(day)) (\(n))"
                return shown.contains(day) && chosen != nil
                    ? "<strong>\(label)</strong>" : "<a href=\"/?day=\(MarkupText.escaped(day))\">\(label)</a>"
            }.joined(separator: " · ")
            if chosen != nil { html += " · <a href=\"/\">newest</a>" }
            html += "</nav>\n"
        }
        if kept.isEmpty {
            html +=
                chosen.map { "<p>No clips on \(MarkupText.escaped($0)).</p>\n" }
                ?? "<p>No clips yet: they appear here when motion is recorded.</p>\n"
        }
        var day = ""
        for (record, _) in kept {
            let thisDay = String(record.start.prefix(10))
            if thisDay != day {
                if !day.isEmpty { html += "</ul></section>\n" }
                day = thisDay
                html += "<section><h2>\(MarkupText.escaped(day))</h2><ul>\n"
            }
            let clip = "/clips/" + Self.pathEncoded(record.file)
            let time = record.start.count >= 19 ? String(record.start.dropFirst(11).prefix(8)) : record.start
            let cause = record.cause?.rawValue ?? "recovered"
            var upload = ""
            switch queue?.state(of: record.file) {
            case .uploaded(let uploaded)?:
                upload =
                    " · <span class=\"uploaded\" title=\"\(MarkupText.escaped(uploaded.url ?? ""))\">uploaded</span>"
            case .waiting? where uploading:
                upload = " · <span class=\"waiting\">upload waiting</span>"
            case .setAside(let aside)? where uploading:
                // The server's answer, for the owner to put right (a restart tries it again).
                upload =
                    " · <span class=\"failed\" title=\"\(MarkupText.escaped(aside.reason ?? ""))\">upload failed</span>"
            default:
                break
            }
            var picture = ""
            if let snapshot = record.snapshot {
                picture =
                    "<a href=\"\(clip)\"><img src=\"/clips/\(Self.pathEncoded(snapshot))\" loading=\"lazy\" alt=\"The event's picture\"></a>"
            }
            html += """
                <li>\(picture)<div class="meta"><a href="\(clip)">\(MarkupText.escaped(time))</a> ·
                \(DecimalText.short(record.durationSeconds, 1)) s · \(MarkupText.escaped(cause))\(upload) ·
                <a href="\(clip)" download>download</a>\(signIn ? " · <a href=\"/delete?file=\(Self.queryEncoded(record.file))\">delete…</a>" : "")</div></li>

                """
        }
        if !day.isEmpty { html += "</ul></section>\n" }
        html += "<footer><p class=\"now\">Vigil \(MarkupText.escaped(version))</p></footer>\n</body>\n</html>\n"
        return html
    }

    /// About how many clips the page lists without a day chosen (whole days, at least one).
    static let clipsPerPage = 100

    /// Whether `text` is a day as the page links them: YYYY-MM-DD.
    static func isDay(_ text: String) -> Bool {
        let u = Array(text.utf8)
        return u.count == 10 && u[4] == UInt8(ascii: "-") && u[7] == UInt8(ascii: "-")
            && u.enumerated().allSatisfy { i, c in i == 4 || i == 7 || (c >= 0x30 && c <= 0x39) }
    }

    /// A relative path for a URL: each component percent-encoded but for the unreserved characters.
    static func pathEncoded(_ path: String) -> String { URLPath.encoded(path) }

    /// A query value: percent-encoded but for the unreserved characters (a / too).
    static func queryEncoded(_ text: String) -> String {
        pathEncoded(text).replacing("/", with: "%2F")
    }

    static func freeSpace(_ bytes: Int64) -> String {
        bytes >= 1 << 30
            ? DecimalText.short(Double(bytes) / Double(1 << 30), 1) + " GB"
            : DecimalText.short(Double(bytes) / Double(1 << 20), 0) + " MB"
    }
}
