import Media
import Snapshot

// The clips' pictures, cached for good: the page names each with its version (`?v=SIZE-MTIME`,
// which changes when the picture is written again), and such an address is answered
// `immutable` for a year; every picture has its version as its validator (`ETag`), so a
// browser that asks again (`If-None-Match`) gets 304 and no bytes. A picture's address without
// a version (`/clips/…jpg`, as before) still works, cached a minute.
//
// The lists show thumbnails (`/thumbs/…jpg?v=…`): a picture wider than `thumbnailWidth`
// (`snapshot.width = 0` keeps the camera's 1920 pixels) decoded at a smaller scale and encoded
// again, on a work thread; one already that small (`snapshot.width`'s default, 640) is sent as
// it is.
extension WebSite {
    /// The width a list's picture is made small to: a card is at most about 380 CSS pixels
    /// wide, 640 device pixels on most phones.
    static let thumbnailWidth = 640
    /// The largest picture made small (a bigger file is not read whole into memory).
    static let thumbnailSource = 16 << 20

    /// The address of the thumbnail of `relativePath` with its picture's version.
    func thumbnailAddress(_ relativePath: String) -> String {
        let base = "/thumbs/" + Self.pathEncoded(relativePath)
        guard let opened = try? files.open(relativePath) else { return base }
        return base + "?v=" + Self.version(opened)
    }

    /// `/thumbs/…jpg`: the picture made small, with its picture's version as its validator.
    func thumbnail(_ relativePath: String, request: HTTPRequest) -> HTTPResponse {
        let opened: SharedFile
        do throws(StorageFiles.Refusal) {
            guard relativePath.hasSuffix(".jpg") else { throw .notServed }
            opened = try files.open(relativePath)
        } catch {
            return file(relativePath, request: request, cache: "no-store")
        }
        let version = Self.version(opened)
        let tag = "\"t\(version)\""
        let cache = cacheControl(asked: request.query["v"], version: version)
        if Self.matches(request.header("if-none-match"), tag) {
            return HTTPResponse(status: 304, headers: [("ETag", tag), ("Cache-Control", cache)])
        }
        guard opened.size <= UInt64(Self.thumbnailSource) else {
            return .error(404, "No thumbnail of a picture this large: open the picture itself (/clips/…).")
        }
        let small: [UInt8]
        do {
            small = try JPEGThumbnail.make(opened.descriptor.read(count: Int(opened.size)), width: Self.thumbnailWidth)
        } catch let error as ThumbnailError {
            return .error(404, error.description)
        } catch {
            return .error(503, "The picture cannot be read now: \(error); try again in a moment.")
        }
        return HTTPResponse(
            status: 200, headers: [("Content-Type", "image/jpeg"), ("ETag", tag), ("Cache-Control", cache)],
            body: .bytes(small))
    }

    /// How long a picture is kept for an address that asks version `asked` of one now at `version`.
    func cacheControl(asked: String?, version: String) -> String {
        switch asked {
        case nil: "private, max-age=60"
        case version?: foreverCache
        // Written again since the page was made: the browser checks each time.
        default: "no-cache"
        }
    }

    /// Whether an `If-None-Match` header names `tag`.
    static func matches(_ header: String?, _ tag: String) -> Bool {
        guard let header else { return false }
        return header == "*" || header.split(separator: ",").contains { $0.trimmingSpaces == tag }
    }

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
        let cache = cacheControl(asked: request.query["v"], version: version)
        if Self.matches(request.header("if-none-match"), tag) {
            return HTTPResponse(status: 304, headers: [("ETag", tag), ("Cache-Control", cache)])
        }
        var response = HTTPResponse.file(opened, type: "image/jpeg", request: request)
        response.headers += [("ETag", tag), ("Cache-Control", cache)]
        return response
    }
}
