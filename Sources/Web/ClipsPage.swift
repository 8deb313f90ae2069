import Media
import Recorder

// The page at `/`, from the clip catalogue alone (never the journal, never the upload queue's
// file), with questions the catalogue answers from an index whatever the number of clips:
// - the first screen: the camera live, the newest clips, and the days with their counts, a
//   page of days at a time (`?days_before=DAY` for older ones);
// - a day (`?day=DAY`): a timeline of its 24 hours, each clip a mark (a click plays it), and
//   its clips an hour at a time (`&hour=H`, the newest hour with clips unless asked);
// - filters (`trigger`, `upload`, `damaged`), kept by every link.
// Plain HTML and CSS, working without script; `/app.js` (same origin) adds the live updates,
// the timeline's pictures on hover and the record / detection buttons.
extension WebSite {
    /// How many days the first screen lists, and how many of the newest clips it shows.
    static let daysPerPage = 30
    static let newestShown = 12
    /// The most clips of one day the timeline marks (a day's clips are read a page at a time).
    static let dayClipsRead = 5000

    /// The page for `query`; nil when the catalogue cannot be read (the caller answers 503).
    func page(_ query: PageQuery) throws(CatalogueError) -> String {
        let catalogue = try openedCatalogue()
        let newest = try catalogue.page(ClipQuery(limit: 1)).entries.first?.file ?? ""
        var html = pageHead(title: camera)
        html += try header(catalogue)
        // The camera live on the first screen; a day's screen is for looking back.
        if query.day == nil { html += liveView() }
        html += "<nav class=\"filters\">\(filterLinks(query))</nav>\n"
        html += "<main id=\"clips\" data-newest=\"\(MarkupText.escaped(newest))\">\n"
        if let day = query.day {
            html += try dayScreen(day, query, catalogue)
        } else {
            html += try firstScreen(query, catalogue)
        }
        html += "</main>\n"
        html += "<footer><p class=\"now\">Vigil \(MarkupText.escaped(version))</p></footer>\n</body>\n</html>\n"
        return html
    }

    /// The page's head, its style and its script.
    func pageHead(title: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(MarkupText.escaped(title)) — Vigil</title>
        <link rel="icon" href="/favicon.svg" type="image/svg+xml">
        <style>\(PageAssets.style)</style>
        <script src="/app.js" defer></script>
        </head>
        <body>

        """
    }

    /// The camera's name, what it does now, the clips and the free space, and the buttons
    /// (shown by the script: they need it).
    func header(_ catalogue: any ClipCatalogue) throws(CatalogueError) -> String {
        let counters = context.counters
        let totals = try catalogue.totals()
        let detection = context.requests.detectionEnabled
        return """
            <header><h1><a href="/">\(MarkupText.escaped(camera))</a></h1>
            <p class="now"><span id="state"\(counters.recording ? " class=\"recording\">recording now" : ">watching")</span> ·
            \(totals.clips) clip\(totals.clips == 1 ? "" : "s") · \(Self.freeSpace(counters.diskFreeBytes)) free</p>
            <p id="controls" class="controls" hidden><button type="button" id="record">Record now</button>
            <button type="button" id="detection" data-on="\(detection)">Detection \(detection ? "on" : "off")</button>
            <span id="said" role="status"></span></p></header>

            """
    }

    /// The live view: with the page's script, the newest frame over Media Source Extensions
    /// (`/live/edge.mp4`), or these sources where the browser has no MSE; without script, these
    /// sources when played (HLS where the browser plays it — Safari, phones —, the progressive
    /// stream elsewhere). Nothing is fetched before the script chooses (`preload="none"`, no
    /// `autoplay`: the script plays it). The latest picture until it starts.
    func liveView() -> String {
        let poster = storage.exists(ClipNaming.latestPicture) ? " poster=\"/latest.jpg\"" : ""
        return """
            <figure class="live"><video id="live" controls preload="none" muted playsinline\(poster) aria-label="The camera, live">
            <source src="/live.m3u8" type="application/vnd.apple.mpegurl">
            <source src="/live.mp4" type="video/mp4">
            </video></figure>

            """
    }

    /// The filters, each a link that keeps the others and the place.
    func filterLinks(_ query: PageQuery) -> String {
        func group(_ label: String, _ options: [(String, PageQuery)], current: PageQuery) -> String {
            "<span>\(label):</span> "
                + options.map { text, changed in
                    let href = changed.link("/", changed.place.filter { $0.0 == "day" })
                    return changed == current
                        ? "<a class=\"on\" href=\"\(href)\" aria-current=\"true\">\(text)</a>"
                        : "<a href=\"\(href)\">\(text)</a>"
                }.joined(separator: " ")
        }
        var base = query
        base.hour = nil
        base.daysBefore = nil
        base.deleted = nil
        func with(_ change: (inout PageQuery) -> Void) -> PageQuery {
            var q = base
            change(&q)
            return q
        }
        return [
            group(
                "trigger",
                [
                    ("all", with { $0.trigger = nil }), ("motion", with { $0.trigger = .motion }),
                    ("external", with { $0.trigger = .external }),
                ], current: base),
            group(
                "upload",
                [("all", with { $0.upload = nil })] + Self.uploadStatesShown.map { s in (s, with { $0.upload = s }) },
                current: base),
            group(
                "damaged",
                [
                    ("all", with { $0.damaged = nil }), ("damaged", with { $0.damaged = true }),
                    ("whole", with { $0.damaged = false }),
                ], current: base),
        ].joined(separator: " <br>")
    }

    static let uploadStatesShown = PageQuery.uploadStates

    /// The newest clips and a page of days with their counts.
    func firstScreen(_ query: PageQuery, _ catalogue: any ClipCatalogue) throws(CatalogueError) -> String {
        var html = ""
        if query.daysBefore == nil {
            var newest = query.clipQuery
            newest.limit = Self.newestShown
            let entries = try catalogue.page(newest).entries.filter { $0.file != query.deleted }
            if entries.isEmpty {
                html +=
                    query.filters.isEmpty
                    ? "<p>No clips yet: they appear here when motion is recorded.</p>\n"
                    : "<p>No clips with these filters.</p>\n"
            } else {
                html += "<h2>Newest</h2>\n<ul class=\"clips\">\n"
                html += entries.map { card($0, query) }.joined()
                html += "</ul>\n"
            }
        }
        let days = try catalogue.days(query.clipQuery, before: query.daysBefore, limit: Self.daysPerPage + 1)
        if !days.isEmpty {
            html += "<h2>Days</h2>\n<ul class=\"days\">\n"
            for day in days.prefix(Self.daysPerPage) {
                html +=
                    "<li><a href=\"\(query.link("/", [("day", day.day)]))\">\(MarkupText.escaped(day.day))</a> <span>\(day.clips) clip\(day.clips == 1 ? "" : "s")</span></li>\n"
            }
            html += "</ul>\n<nav class=\"pager\">"
            if query.daysBefore != nil { html += "<a href=\"\(query.link("/"))\">newest days</a> " }
            if days.count > Self.daysPerPage, let last = days.prefix(Self.daysPerPage).last {
                html += "<a href=\"\(query.link("/", [("days_before", last.day)]))\" rel=\"next\">older days</a>"
            }
            html += "</nav>\n"
        }
        return html
    }

    /// A day's clips, newest first (every page of them, up to `dayClipsRead`).
    func dayEntries(
        _ day: String, _ query: PageQuery, _ catalogue: any ClipCatalogue
    ) throws(CatalogueError)
        -> [CatalogueEntry]
    {
        var asked = query.clipQuery
        asked.day = day
        asked.limit = ClipQuery.largestPage
        var entries: [CatalogueEntry] = []
        while entries.count < Self.dayClipsRead {
            let page = try catalogue.page(asked)
            entries += page.entries
            guard let next = page.next else { break }
            asked.before = next
        }
        return entries.filter { $0.file != query.deleted }
    }

    /// One day: its timeline, its hours with their counts, and one hour's clips.
    func dayScreen(
        _ day: String, _ query: PageQuery, _ catalogue: any ClipCatalogue
    ) throws(CatalogueError)
        -> String
    {
        let entries = try dayEntries(day, query, catalogue)
        var html = "<h2>\(MarkupText.escaped(day)) · \(entries.count) clip\(entries.count == 1 ? "" : "s")</h2>\n"
        var around = query
        around.day = nil
        around.hour = nil
        html += "<nav class=\"pager\"><a href=\"\(around.link("/"))\">all days</a></nav>\n"
        guard !entries.isEmpty else {
            return html
                + "<p>No clips on \(MarkupText.escaped(day))\(query.filters.isEmpty ? "" : " with these filters").</p>\n"
        }
        var perHour = [Int](repeating: 0, count: 24)
        for entry in entries { if let h = HumanTime.hour(entry.record.start), (0..<24).contains(h) { perHour[h] += 1 } }
        let hour = query.hour ?? (perHour.lastIndex { $0 > 0 } ?? 0)
        var place = query
        place.day = day
        place.deleted = nil
        // The timeline: each clip a mark where it starts in the day.
        html += "<div class=\"timeline\" aria-label=\"The day's clips on a timeline of 24 hours\">"
        for entry in entries {
            guard let second = HumanTime.secondOfDay(entry.record.start) else { continue }
            place.hour = second / 3600
            let at = DecimalText.short(Double(second) / 864, 2)
            let picture = entry.record.snapshot.map { " data-pic=\"/thumbs/\(Self.pathEncoded($0))\"" } ?? ""
            html +=
                "<a href=\"\(place.link("/clip", [("file", entry.file)] + place.place))\" style=\"left:\(at)%\" title=\"\(HumanTime.clock(entry.record.start))\"\(picture)></a>"
        }
        html +=
            "</div>\n<div class=\"hours\" aria-hidden=\"true\"><span>0h</span><span>6h</span><span>12h</span><span>18h</span><span>24h</span></div>\n"
        // The hours that have clips, each a link.
        html += "<nav class=\"hourlinks\">"
        for h in 0..<24 where perHour[h] > 0 {
            place.hour = h
            let label = "\(h < 10 ? "0" : "")\(h):00 (\(perHour[h]))"
            html +=
                h == hour
                ? "<a class=\"on\" aria-current=\"true\" href=\"\(place.link("/", place.place))\">\(label)</a> "
                : "<a href=\"\(place.link("/", place.place))\">\(label)</a> "
        }
        html += "</nav>\n"
        let shown = entries.filter { HumanTime.hour($0.record.start) == hour }
        place.hour = hour
        html +=
            "<h3>\(hour < 10 ? "0" : "")\(hour):00–\(hour < 9 ? "0" : "")\(hour + 1):00 · \(shown.count) clip\(shown.count == 1 ? "" : "s")</h3>\n"
        html += "<ul class=\"clips\">\n" + shown.map { card($0, place) }.joined() + "</ul>\n"
        // The next hours with clips, either way.
        html += "<nav class=\"pager\">"
        if let newer = perHour.indices.first(where: { $0 > hour && perHour[$0] > 0 }) {
            place.hour = newer
            html += "<a href=\"\(place.link("/", place.place))\">newer hour</a> "
        }
        if let older = perHour.indices.last(where: { $0 < hour && perHour[$0] > 0 }) {
            place.hour = older
            html += "<a href=\"\(place.link("/", place.place))\" rel=\"next\">older hour</a>"
        }
        html += "</nav>\n"
        return html
    }

    /// One clip in a list: its picture, its time, length and cause, its upload, and its links.
    func card(_ entry: CatalogueEntry, _ query: PageQuery) -> String {
        let record = entry.record
        let viewer = query.link("/clip", [("file", record.file)] + query.place)
        let clip = "/clips/" + Self.pathEncoded(record.file)
        let cause = record.cause?.rawValue ?? "recovered"
        let picture =
            record.snapshot.map {
                "<img src=\"\(thumbnailAddress($0))\" loading=\"lazy\" alt=\"The picture of the clip at \(HumanTime.clock(record.start))\">"
            } ?? "<span class=\"nopic\">no picture</span>"
        let deletion = signIn ? " <a href=\"/delete?file=\(Self.queryEncoded(record.file))\">delete…</a>" : ""
        return """
            <li><a class="pic" href="\(viewer)">\(picture)</a><div class="meta"><a href="\(viewer)">\(HumanTime.clock(record.start))</a>
            \(DecimalText.short(record.durationSeconds, 1)) s · \(MarkupText.escaped(cause))\(marks(entry))
            <a href="\(clip)" download>download</a>\(deletion)</div></li>

            """
    }

    /// What the catalogue says of a clip beyond its time: damaged, and where its upload stands
    /// (what waits or failed is said only while uploads run: not after `upload.url` was taken
    /// out).
    func marks(_ entry: CatalogueEntry) -> String {
        let uploading = context.uploadsIfRunning != nil
        var marks = ""
        if entry.record.damaged == true { marks += " · <span class=\"failed\">damaged</span>" }
        switch entry.upload {
        case .uploaded(let url)?:
            marks += " · <span class=\"uploaded\" title=\"\(MarkupText.escaped(url))\">uploaded</span>"
        case .waiting? where uploading:
            marks += " · <span class=\"waiting\">upload waiting</span>"
        case .failed(let reason)? where uploading:
            marks += " · <span class=\"failed\" title=\"\(MarkupText.escaped(reason))\">upload failed</span>"
        default:
            break
        }
        return marks
    }

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
