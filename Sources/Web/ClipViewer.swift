import Media
import Recorder

// The clip viewer (`/clip?file=F`, with the list's filters and place): the clip playing, its
// picture before it starts, when it was (in words), its length, cause and upload; the newer and
// the older clip (as the filters list them), the way back to its hour, download and delete.
extension WebSite {
    func viewer(_ request: HTTPRequest) -> HTTPResponse {
        let query: PageQuery
        switch PageQuery.parse(request.query) {
        case .success(let asked): query = asked
        case .failure(let problem): return .error(400, problem.description)
        }
        guard let file = request.query["file"] else {
            return .error(400, "Say which clip: /clip?file=PATH, as the page links it.")
        }
        do throws(CatalogueError) {
            let catalogue = try openedCatalogue()
            guard let entry = try catalogue.entry(file) else { return Self.noSuchClip }
            let (newer, older) = try neighbours(entry, query, catalogue)
            return .text(
                200, viewerPage(entry, query, newer: newer, older: older), type: "text/html; charset=utf-8",
                headers: Self.pageHeaders)
        } catch {
            forgetCatalogue()
            return .error(503, "The clip catalogue cannot be read now (\(error.description)); try again in a moment.")
        }
    }

    /// The clips listed just before (newer) and just after (older) `entry` with `query`'s
    /// filters, across days.
    func neighbours(
        _ entry: CatalogueEntry, _ query: PageQuery, _ catalogue: any ClipCatalogue
    )
        throws(CatalogueError) -> (newer: CatalogueEntry?, older: CatalogueEntry?)
    {
        var asked = query.clipQuery
        asked.day = nil
        asked.before = ClipCursor(after: entry)
        asked.limit = 1
        let older = try catalogue.page(asked).entries.first
        // The newer one: in its own day, else the oldest of the next day that has clips.
        let day = try dayEntries(entry.day, query, catalogue)
        if let index = day.firstIndex(where: { $0.file == entry.file }), index > 0 {
            return (day[index - 1], older)
        }
        var filters = query.clipQuery
        filters.day = nil
        let days = try catalogue.days(filters, before: nil, limit: 3660)
        guard let index = days.firstIndex(where: { $0.day <= entry.day }) ?? Optional(days.count), index > 0,
            days[index - 1].day > entry.day
        else { return (nil, older) }
        return (try dayEntries(days[index - 1].day, query, catalogue).last, older)
    }

    func viewerPage(
        _ entry: CatalogueEntry, _ query: PageQuery, newer: CatalogueEntry?, older: CatalogueEntry?
    )
        -> String
    {
        let record = entry.record
        var place = query
        place.day = entry.day
        place.hour = HumanTime.hour(record.start)
        place.deleted = nil
        let clip = "/clips/" + Self.pathEncoded(record.file)
        let poster = record.snapshot.map { " poster=\"\(pictureAddress($0))\"" } ?? ""
        let when = HumanTime.text(record.start)
        func neighbour(_ other: CatalogueEntry?, _ text: String, _ rel: String) -> String {
            guard let other else { return "<span class=\"off\">\(text)</span>" }
            var at = place
            at.day = other.day
            at.hour = HumanTime.hour(other.record.start)
            return "<a href=\"\(at.link("/clip", [("file", other.file)] + at.place))\" rel=\"\(rel)\">\(text)</a>"
        }
        let deletion = signIn ? "<a href=\"/delete?file=\(Self.queryEncoded(record.file))\">delete…</a>" : ""
        var html = pageHead(title: "\(when) — \(camera)")
        html += """
            <header><h1><a href="/">\(MarkupText.escaped(camera))</a></h1></header>
            <main class="viewer">
            <h2>\(MarkupText.escaped(when))</h2>
            <figure class="live"><video controls autoplay muted playsinline preload="metadata"\(poster) src="\(clip)" aria-label="The clip"></video></figure>
            <p class="meta">\(DecimalText.short(record.durationSeconds, 1)) s · \(MarkupText.escaped(record.cause?.rawValue ?? "recovered"))\(marks(entry))</p>
            <nav class="pager">\(neighbour(newer, "← newer", "prev")) \(neighbour(older, "older →", "next"))
            <a href="\(place.link("/", place.place))">back to the list</a> <a href="\(clip)" download>download</a> \(deletion)</nav>
            </main>
            </body>
            </html>

            """
        return html
    }
}
