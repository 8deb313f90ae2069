import POSIX

/// The names the web server answers to, read from each request's `Host` header, against DNS
/// rebinding: a page of another site whose name is made to resolve to this machine (or to its
/// loopback) reaches the server from the owner's own browser, but its requests carry that
/// name. So a request is served only when its host is
/// - an IP address (`192.168.1.20`, `[::1]`): an address cannot be rebound, and a page
///   loaded from an address is that address's own;
/// - `localhost`, or a name under it (`camera.localhost`): browsers keep those on the loopback
///   and never ask DNS;
/// - this machine's host name, its first label, and that label under `.local` (mDNS);
/// - `web.url`'s host (the name the owner gave, for another one);
/// with or without a port, in any case, with or without the trailing dot. Anything else gets
/// 421 Misdirected Request, before any sign-in.
public struct HostCheck: Sendable, Equatable {
    /// The names served, in lower case, without a trailing dot.
    public let names: [String]

    /// The names of the machine called `machine` (its host name), and `extra` ones.
    public init(machine: String, extra: [String] = []) {
        var names = ["localhost"]
        let host = Self.normalized(machine)
        if !host.isEmpty {
            let label = String(host.prefix { $0 != "." })
            names += [host, label, label + ".local"]
        }
        names += extra.map(Self.normalized)
        var seen = Set<String>()
        self.names = names.filter { !$0.isEmpty && seen.insert($0).inserted }
    }

    /// Whether a request whose `Host` header is `host` is served. Without one (HTTP/1.0: the
    /// library refuses an HTTP/1.1 request without it) it is: every browser sends it.
    public func allows(_ host: String?) -> Bool {
        guard let host else { return true }
        guard let name = Self.hostPart(host) else { return false }
        if name.hasPrefix("[") {
            return NumericAddress.parse(Self.withoutZone(String(name.dropFirst().dropLast()))) != nil
        }
        if NumericAddress.parse(name) != nil { return true }
        let lower = Self.normalized(name)
        return names.contains(lower) || lower.hasSuffix(".localhost")
    }

    /// The host of a `Host` header: a name, an IPv4 address, or an IPv6 address in brackets,
    /// without the port; nil when the header is none of those (an empty one, a port that is not
    /// a number, something after the brackets).
    static func hostPart(_ header: String) -> String? {
        let text = header.trimmingSpaces
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || Self.isPort(rest) else { return nil }
            return String(text[...close])
        }
        var name = Substring(text)
        if let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon {
            guard Self.isPort(text[colon...]) else { return nil }
            name = text[..<colon]
        } else if text.contains(":") {
            // More than one colon without brackets: an IPv6 address written as it should not
            // be in a URL — no name holds a colon, so it is one or it is nothing.
            return NumericAddress.parse(Self.withoutZone(text)) != nil ? text : nil
        }
        return name.isEmpty ? nil : String(name)
    }

    /// The sentence a misdirected request gets.
    public var refusal: String {
        let listed = names.map { "\"\($0)\"" }.joined(separator: ", ")
        return
            "This camera's web server answers to its IP addresses and to \(listed) (and names under localhost), not to the name in this address: a page of another site may not reach it through a name of its own. To reach it by another name, set web.url = \"http://NAME:PORT\" in the configuration and restart the agent."
    }

    /// `:PORT`: a colon and 1 to 5 digits.
    private static func isPort(_ text: Substring) -> Bool {
        guard text.first == ":" else { return false }
        let digits = text.dropFirst()
        return (1...5).contains(digits.count) && digits.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// An IPv6 address without its zone (`fe80::1%eth0`, `%25` in a URL).
    private static func withoutZone(_ text: String) -> String {
        String(text.prefix { $0 != "%" })
    }

    private static func normalized(_ name: String) -> String {
        var lower = name.trimmingSpaces.lowercased()
        if lower.hasSuffix(".") { lower.removeLast() }
        return lower
    }
}
