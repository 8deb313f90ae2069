import Foundation
import TestSupport

/// Debian's Chromium, headless, with one page open at a window's size, driven through its
/// DevTools protocol (a WebSocket on a loopback port, spoken here over a `LoopbackClient`): to
/// run a script in the page as an owner's browser shows it (sizes, what is loaded) and take a
/// screenshot, without anything of the test in the page itself.
final class DevToolsBrowser {
    let process = Process()
    let socket: LoopbackClient
    /// Where the WebSocket's frames start in what the socket received.
    var consumed = 0
    var next = 0

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    init(_ dir: TemporaryDirectory, width: Int, height: Int, page: String) throws {
        let profile = dir.file("profile-devtools-\(UUID().uuidString.prefix(8))")
        // Foundation starts it in a process group of its own: its renderers go with it.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/chromium")
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--mute-audio", "--hide-scrollbars",
            "--autoplay-policy=no-user-gesture-required", "--user-data-dir=\(profile)", "--remote-debugging-port=0",
            "--window-size=\(width),\(height)", page,
        ]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        var address: (port: Int, path: String)?
        let deadline = Date().addingTimeInterval(60)
        while address == nil && Date() < deadline && process.isRunning {
            Thread.sleep(forTimeInterval: 0.3)
            guard
                let port = (try? String(contentsOfFile: profile + "/DevToolsActivePort", encoding: .utf8))?
                    .split(separator: "\n").first.flatMap({ Int($0) }),
                let list = try? runTool("curl", ["-sS", "--max-time", "5", "http://127.0.0.1:\(port)/json/list"]),
                let pages = try? JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]],
                let url = pages.first(where: { $0["type"] as? String == "page" })?["webSocketDebuggerUrl"] as? String,
                let path = url.range(of: "/devtools/").map({ String(url[$0.lowerBound...]) })
            else { continue }
            address = (port, path)
        }
        guard let address else {
            Self.stop(process)
            throw Failure(description: "Chromium's DevTools did not answer within 60 s")
        }
        socket = try LoopbackClient(port: address.port)
        socket.send(
            "GET \(address.path) HTTP/1.1\r\nHost: 127.0.0.1:\(address.port)\r\nUpgrade: websocket\r\n"
                + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        _ = LoopbackClient.wait(for: [socket], timeout: 30) { $0.hasHeaders || $0.ended }
        guard socket.statusLine?.hasPrefix("HTTP/1.1 101") == true,
            let end = socket.received.firstRange(of: Array("\r\n\r\n".utf8))
        else {
            Self.stop(process)
            throw Failure(description: "DevTools refused the WebSocket: \(socket.statusLine ?? "no answer")")
        }
        consumed = end.upperBound
        // Headless Chromium keeps its window at least 500 pixels wide whatever --window-size
        // says: the page is shown at the size asked (a phone's as a phone shows it: its
        // viewport meta followed), then loaded again at it.
        do {
            _ = try call(
                "Emulation.setDeviceMetricsOverride",
                ["width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600])
            _ = try call("Page.reload", [:])
        } catch {
            Self.stop(process)
            throw error
        }
    }

    static func stop(_ process: Process) {
        kill(-process.processIdentifier, SIGKILL)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func close() { Self.stop(process) }

    /// Sends a command and returns its `result`.
    func call(_ method: String, _ params: [String: Any]) throws -> [String: Any] {
        next += 1
        let id = next
        let message = try JSONSerialization.data(withJSONObject: ["id": id, "method": method, "params": params])
        // A client's frame: text, masked (with a key of zeros, which leaves the bytes as they are).
        var frame: [UInt8] = [0x81]
        if message.count < 126 {
            frame.append(0x80 | UInt8(message.count))
        } else if message.count < 65536 {
            // (Each byte typed: Swift 6.0.3 takes `0x80 | 126` beside them for an Int.)
            let length: [UInt8] = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)]
            frame.append(0x80 | 126)
            frame += length
        } else {
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((message.count >> ($0 * 8)) & 0xFF) }
        }
        frame += [0, 0, 0, 0] + Array(message)
        socket.send(bytes: frame)
        var answer: [String: Any]?
        _ = LoopbackClient.wait(for: [socket], timeout: 60) { _ in
            while let text = self.nextMessage() {
                if let object = try? JSONSerialization.jsonObject(with: Data(text)) as? [String: Any],
                    object["id"] as? Int == id
                {
                    answer = object
                    return true
                }
            }
            return self.socket.ended
        }
        guard let answer else { throw Failure(description: "\(method): no answer from DevTools") }
        if let error = answer["error"] { throw Failure(description: "\(method): \(error)") }
        return answer["result"] as? [String: Any] ?? [:]
    }

    /// The next whole message the socket holds, if any.
    func nextMessage() -> [UInt8]? {
        var at = consumed
        var payload: [UInt8] = []
        let bytes = socket.received
        while true {
            guard bytes.count >= at + 2 else { return nil }
            let fin = bytes[at] & 0x80 != 0
            var length = Int(bytes[at + 1] & 0x7F)
            var header = 2
            if length == 126 {
                guard bytes.count >= at + 4 else { return nil }
                length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
                header = 4
            } else if length == 127 {
                guard bytes.count >= at + 10 else { return nil }
                length = (0..<8).reduce(0) { $0 << 8 | Int(bytes[at + 2 + $1]) }
                header = 10
            }
            guard bytes.count >= at + header + length else { return nil }
            payload += bytes[(at + header)..<(at + header + length)]
            at += header + length
            if fin {
                consumed = at
                return payload
            }
        }
    }

    /// What `expression` comes to in the page (a string).
    func evaluate(_ expression: String) throws -> String {
        let result = try call("Runtime.evaluate", ["expression": expression, "returnByValue": true])
        let value = (result["result"] as? [String: Any])?["value"]
        return value as? String ?? "\(value ?? "undefined")"
    }

    /// A PNG of what the page shows now.
    func screenshot(to path: String) throws {
        let result = try call("Page.captureScreenshot", ["format": "png"])
        guard let text = result["data"] as? String, let data = Data(base64Encoded: text) else {
            throw Failure(description: "Page.captureScreenshot gave no picture")
        }
        try data.write(to: URL(fileURLWithPath: path))
    }
}
