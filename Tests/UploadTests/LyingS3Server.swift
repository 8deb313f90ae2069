import Foundation
import TestSupport

/// An S3-like server on a loopback port that lies — the attacker of the upload tests, not a
/// stand-in for a real store (SeaweedFS is that): a small Python http.server the test writes
/// and starts. It takes any signature, keeps what it stores in a directory of its own, and
/// logs each request (`requests`). What it does with a PUT is `lie`'s to say; a key may be
/// refused forever (`refusing`).
final class LyingS3Server {
    enum Lie: String {
        /// None: it stores what is sent and answers truthfully.
        case none
        /// It stores the body with a byte changed, ignoring Content-MD5, and answers HEAD
        /// with the size and the ETag (MD5) of what was sent.
        case corruptCopy = "corrupt"
        /// It stores nothing, and answers HEAD with the size and ETag of what was sent.
        case nothingStored = "nothing"
        /// It stores the body with a byte changed, ignoring Content-MD5, and answers HEAD
        /// truthfully: the size and the ETag of what it stores.
        case corruptCopyTrueETag = "corrupt-true-etag"
    }

    let directory: TemporaryDirectory
    let bucket = "clips"
    let region = "us-east-1"
    let port: Int
    private var process: Process?
    private let name: String

    var endpoint: String { "http://127.0.0.1:\(port)" }

    /// `refusing`: a PUT of a key that contains this text is answered this HTTP status (403:
    /// AccessDenied, else InternalError), every time.
    init(_ directory: TemporaryDirectory, lie: Lie = .none, refusing: (key: String, status: Int)? = nil) throws {
        self.directory = directory
        name = "lying-s3-\(UUID().uuidString.prefix(8))"
        let python = try TestServers.program("python")
        let script = directory.file(name + ".py")
        try Self.script.write(toFile: script, atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: directory.file(name), withIntermediateDirectories: true)
        let portFile = directory.file(name + ".port")
        process = try TestServers.launch(
            [
                python, script, directory.file(name), lie.rawValue, refusing?.key ?? "", "\(refusing?.status ?? 0)",
                portFile, directory.file(name + ".requests"),
            ], log: directory.file(name + ".log"), directory: directory.path)
        let deadline = Date().addingTimeInterval(30)
        var port: Int?
        while Date() < deadline, process?.isRunning == true {
            port = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap {
                Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            if let port, TestServers.accepts(port) { break }
            usleep(50_000)
        }
        guard let port, TestServers.accepts(port) else {
            let log = (try? String(contentsOfFile: directory.file(name + ".log"), encoding: .utf8)) ?? ""
            TestServers.kill(process)
            throw ServerError(description: "the lying S3 server did not start:\n\(log)")
        }
        self.port = port
    }

    deinit { TestServers.kill(process) }

    /// What it stores under `key` (of the bucket), or nil.
    func object(_ key: String) -> Data? {
        FileManager.default.contents(atPath: directory.file(name) + "/" + Self.storedName(bucket + "/" + key))
    }

    /// Each request answered so far: "METHOD KEY STATUS" (the key with the bucket).
    var requests: [String] {
        ((try? String(contentsOfFile: directory.file(name + ".requests"), encoding: .utf8)) ?? "")
            .split(separator: "\n").map(String.init)
    }

    private static func storedName(_ key: String) -> String { key.replacing("/", with: "%2F") }

    private static let script = #"""
        import hashlib, http.server, os, socketserver, sys, threading
        store, lie, refused, refused_status, port_file, requests = sys.argv[1:7]
        refused_status = int(refused_status)
        sent = {}
        lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):
                pass

            def key(self):
                return self.path.split("?")[0].lstrip("/")

            def stored(self, key):
                return os.path.join(store, key.replace("/", "%2F"))

            def answer(self, status, headers=(), body=b"", length=None):
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
                with lock, open(requests, "a") as f:
                    f.write("%s %s %d\n" % (self.command, self.key(), status))

            def error(self, status, code):
                body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s</Code>"
                        "<Message>%s</Message></Error>" % (code, code)).encode()
                self.answer(status, [("Content-Type", "application/xml")], body)

            def do_PUT(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                key = self.key()
                if refused and refused in key:
                    return self.error(refused_status, "AccessDenied" if refused_status == 403 else "InternalError")
                digest = hashlib.md5(body).hexdigest()
                with lock:
                    sent[key] = (len(body), digest)
                if lie != "nothing":
                    data = body
                    if lie.startswith("corrupt") and data:
                        middle = len(data) // 2
                        data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:]
                    with open(self.stored(key) + ".part", "wb") as f:
                        f.write(data)
                    os.rename(self.stored(key) + ".part", self.stored(key))
                self.answer(200, [("ETag", '"%s"' % digest)])

            def object(self, key):
                try:
                    with open(self.stored(key), "rb") as f:
                        return f.read()
                except FileNotFoundError:
                    return None

            def do_HEAD(self):
                key = self.key()
                data = self.object(key)
                with lock:
                    claimed = sent.get(key)
                if lie in ("corrupt", "nothing") and claimed:
                    size, digest = claimed
                elif data is not None:
                    size, digest = len(data), hashlib.md5(data).hexdigest()
                else:
                    return self.answer(404)
                self.answer(200, [("ETag", '"%s"' % digest)], length=size)

            def do_GET(self):
                data = self.object(self.key())
                if data is None:
                    return self.error(404, "NoSuchKey")
                self.answer(200, [("ETag", '"%s"' % hashlib.md5(data).hexdigest())], data)

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        server = Server(("127.0.0.1", 0), Handler)
        with open(port_file + ".new", "w") as f:
            f.write(str(server.server_address[1]))
        os.rename(port_file + ".new", port_file)
        server.serve_forever()
        """#
}
