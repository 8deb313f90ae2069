import Media

// The clips' pictures, cached for good: the page names each with its version (`?v=SIZE-MTIME`,
// which changes when the picture is written again), and such an address is answered
// `immutable` for a year; every picture has its version as its validator (`ETag`), so a
// browser that asks again (`If-None-Match`) gets 304 and no bytes. A picture's address without
// a version (`/clips/…jpg`, as before) still works, cached a minute.
extension WebSite {
    /// The address of the picture `relativePath` with its version; without one when it cannot
    /// be opened now (retention may have deleted it).
    func pictureAddress(_ relativePath: String) -> String {
        let base = "/clips/" + Self.pathEncoded(relativePath)
        guard let opened = try? files.open(relativePath) else { return base }
        return base + "?v=" + Self.version(opened)
    }

    /// A file's version: its size and the milliseconds of its last change.
    static func version(_ file: SharedFile) -> String {
        "\(file.size)-\(Int64((file.modified * 1000).rounded()))"
    }

    /// How long a picture is kept when its address has its version: a year, never asked again.
    var foreverCache: String {
        // With passwords, a cache between the browser and the camera keeps none of it.
        (signIn ? "private" : "public") + ", max-age=31536000, immutable"
    }

    /// `/clips/…jpg`: the picture with its validator; 304 when the browser has this version.
    func picture(_ relativePath: String, request: HTTPRequest) -> HTTPResponse {
        let opened: SharedFile
        do throws(StorageFiles.Refusal) {
            opened = try files.open(relativePath)
        } catch {
            return file(relativePath, request: request, cache: "no-store")
        }
        let version = Self.version(opened)
        let tag = "\"\(version)\""
        let cache =
            switch request.query["v"] {
            case nil: "private, max-age=60"
            case version?: foreverCache
            // Written again since the page was made: the browser checks each time.
            default: "no-cache"
            }
        if let asked = request.header("if-none-match"),
            asked == "*" || asked.split(separator: ",").contains(where: { $0.trimmingSpaces == tag })
        {
            return HTTPResponse(status: 304, headers: [("ETag", tag), ("Cache-Control", cache)])
        }
        var response = HTTPResponse.file(opened, type: "image/jpeg", request: request)
        response.headers += [("ETag", tag), ("Cache-Control", cache)]
        return response
    }
}
