/// A small XML reader for what ONVIF clients send (SOAP requests, WS-Discovery probes), which
/// comes from anyone on the network: bounded in size, depth and elements, with no DTD (a
/// `<!DOCTYPE` is refused, so no entity of its own is ever expanded) and only XML's five named
/// entities and character references. Names are read with their namespaces resolved (clients
/// choose their own prefixes), so a request is matched by namespace and local name. Never
/// traps: input it cannot read is an `XMLError`.
public enum XMLReader {
    /// How much a document may hold.
    public struct Limits: Sendable, Equatable {
        public var bytes = 64 * 1024
        public var depth = 32
        public var elements = 4096
        public var attributes = 64
        public init() {}
    }

    /// The document's root element.
    public static func parse(_ bytes: [UInt8], limits: Limits = Limits()) throws(XMLError) -> XMLElement {
        guard bytes.count <= limits.bytes else { throw .tooLarge(limit: limits.bytes) }
        var parser = Parser(bytes: bytes, limits: limits)
        return try parser.document()
    }
}

/// Why a document was not read.
public enum XMLError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooLarge(limit: Int)
    case tooDeep(limit: Int)
    case tooManyElements(limit: Int)
    case doctype
    case malformed(offset: Int, String)

    public var description: String {
        switch self {
        case .tooLarge(let limit): "the XML is larger than \(limit) bytes"
        case .tooDeep(let limit): "the XML nests elements deeper than \(limit)"
        case .tooManyElements(let limit): "the XML has more than \(limit) elements"
        case .doctype: "the XML has a DOCTYPE (no DTD is read)"
        case .malformed(let offset, let what): "the XML is not well formed at byte \(offset): \(what)"
        }
    }
}

/// An element: its name resolved against the namespaces in scope, its attributes, its child
/// elements and the character data directly inside it.
public struct XMLElement: Sendable, Equatable {
    public struct Attribute: Sendable, Equatable {
        public var name: String
        public var namespace: String?
        public var value: String
    }

    /// The local name (without its prefix).
    public var name: String
    /// The namespace its prefix (or the default namespace) names; nil for none.
    public var namespace: String?
    public var attributes: [Attribute] = []
    public var children: [XMLElement] = []
    /// The character data directly inside (not its children's), entities decoded.
    public var text = ""
    /// The namespaces in scope, prefix ("" for the default) to name: what a QName in its text
    /// (`dn:NetworkVideoTransmitter`) is resolved with.
    public var scope: [String: String] = [:]

    /// Its first child called `name` (local name), in `namespace` when given.
    public func child(_ name: String, namespace: String? = nil) -> XMLElement? {
        children.first { $0.name == name && (namespace == nil || $0.namespace == namespace) }
    }

    /// Its attribute called `name` (local name), whatever its prefix.
    public func attribute(_ name: String) -> String? { attributes.first { $0.name == name }?.value }

    /// Its text without the white space around it.
    public var trimmedText: String { String(text.trimmingXMLSpace) }

    /// A QName written in its text or an attribute (`prefix:name`), resolved in its scope: the
    /// namespace its prefix names (the default namespace without one; nil when the prefix is
    /// not declared) and the local name.
    public func resolve(_ qname: Substring) -> (namespace: String?, name: String) {
        guard let colon = qname.firstIndex(of: ":") else { return (scope[""], String(qname)) }
        return (scope[String(qname[..<colon])], String(qname[qname.index(after: colon)...]))
    }
}

extension StringProtocol {
    /// Without XML's white space (space, tab, CR, LF) at either end.
    var trimmingXMLSpace: SubSequence {
        let space: Set<Character> = [" ", "\t", "\r", "\n", "\r\n"]
        var text = self[...]
        while let first = text.first, space.contains(first) { text = text.dropFirst() }
        while let last = text.last, space.contains(last) { text = text.dropLast() }
        return text
    }
}

private struct Parser {
    let bytes: [UInt8]
    let limits: XMLReader.Limits
    var at = 0
    var elements = 0

    /// An element being read: its qualified name as written (for its end tag), and its text.
    struct Open {
        var element: XMLElement
        var qname: [UInt8]
        var text: [UInt8] = []
    }

    init(bytes: [UInt8], limits: XMLReader.Limits) {
        self.bytes = bytes
        self.limits = limits
    }

    func fail(_ what: String) -> XMLError { .malformed(offset: at, what) }

    mutating func document() throws(XMLError) -> XMLElement {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { at = 3 }
        var stack: [Open] = []
        var root: XMLElement?
        while at < bytes.count {
            if bytes[at] != UInt8(ascii: "<") {
                let text = try characterData()
                if stack.isEmpty {
                    guard text.allSatisfy(isSpace) else { throw fail("text outside the root element") }
                } else {
                    stack[stack.count - 1].text += text
                }
                continue
            }
            if starts("<?") {
                try skip(past: Array("?>".utf8))
            } else if starts("<!--") {
                try skip(past: Array("-->".utf8))
            } else if starts("<![CDATA[") {
                guard !stack.isEmpty else { throw fail("CDATA outside the root element") }
                at += 9
                let start = at
                try skip(past: Array("]]>".utf8))
                stack[stack.count - 1].text += bytes[start..<(at - 3)]
            } else if starts("<!") {
                throw .doctype
            } else if starts("</") {
                at += 2
                let name = try qualifiedName()
                skipSpace()
                guard at < bytes.count, bytes[at] == UInt8(ascii: ">") else { throw fail("an end tag without >") }
                at += 1
                guard var open = stack.popLast(), open.qname == name else {
                    throw fail("an end tag that closes no open element")
                }
                open.element.text = String(decoding: open.text, as: UTF8.self)
                if stack.isEmpty {
                    guard root == nil else { throw fail("a second root element") }
                    root = open.element
                } else {
                    stack[stack.count - 1].element.children.append(open.element)
                }
            } else {
                guard root == nil else { throw fail("a second root element") }
                at += 1
                let (open, empty) = try startTag(scope: stack.last?.element.scope ?? [:])
                elements += 1
                guard elements <= limits.elements else { throw .tooManyElements(limit: limits.elements) }
                if empty {
                    if stack.isEmpty {
                        root = open.element
                    } else {
                        stack[stack.count - 1].element.children.append(open.element)
                    }
                } else {
                    guard stack.count < limits.depth else { throw .tooDeep(limit: limits.depth) }
                    stack.append(open)
                }
            }
        }
        guard stack.isEmpty, let root else { throw fail(root == nil ? "no root element" : "an element left open") }
        return root
    }

    /// After `<`: the name, the attributes, and whether it ends with `/>`.
    mutating func startTag(scope inherited: [String: String]) throws(XMLError) -> (Open, Bool) {
        let qname = try qualifiedName()
        var raw: [(name: [UInt8], value: String)] = []
        var empty = false
        while true {
            let before = at
            skipSpace()
            guard at < bytes.count else { throw fail("a start tag without >") }
            if bytes[at] == UInt8(ascii: ">") {
                at += 1
                break
            }
            if bytes[at] == UInt8(ascii: "/") {
                at += 1
                guard at < bytes.count, bytes[at] == UInt8(ascii: ">") else { throw fail("/ without >") }
                at += 1
                empty = true
                break
            }
            guard at > before else { throw fail("attributes without white space between them") }
            let name = try qualifiedName()
            skipSpace()
            guard at < bytes.count, bytes[at] == UInt8(ascii: "=") else { throw fail("an attribute without =") }
            at += 1
            skipSpace()
            guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") || bytes[at] == UInt8(ascii: "'") else {
                throw fail("an attribute value without quotes")
            }
            let quote = bytes[at]
            at += 1
            let start = at
            while at < bytes.count, bytes[at] != quote {
                guard bytes[at] != UInt8(ascii: "<") else { throw fail("< in an attribute value") }
                at += 1
            }
            guard at < bytes.count else { throw fail("an attribute value without its end quote") }
            let value = try decode(bytes[start..<at], offset: start)
            at += 1
            raw.append((name, String(decoding: value, as: UTF8.self)))
            guard raw.count <= limits.attributes else { throw fail("more than \(limits.attributes) attributes") }
        }
        var scope = inherited
        for (name, value) in raw {
            if name == Array("xmlns".utf8) {
                scope[""] = value.isEmpty ? nil : value
            } else if name.starts(with: Array("xmlns:".utf8)) {
                scope[String(decoding: name.dropFirst(6), as: UTF8.self)] = value
            }
        }
        let (namespace, local) = try resolve(qname, scope: scope, isElement: true)
        var element = XMLElement(name: local, namespace: namespace, scope: scope)
        for (name, value) in raw where name != Array("xmlns".utf8) && !name.starts(with: Array("xmlns:".utf8)) {
            let (namespace, local) = try resolve(name, scope: scope, isElement: false)
            element.attributes.append(.init(name: local, namespace: namespace, value: value))
        }
        return (Open(element: element, qname: qname), empty)
    }

    /// A name as written: its prefix resolved in `scope` (an element without one takes the
    /// default namespace, an attribute none).
    func resolve(_ qname: [UInt8], scope: [String: String], isElement: Bool) throws(XMLError) -> (String?, String) {
        guard let colon = qname.firstIndex(of: UInt8(ascii: ":")) else {
            return (isElement ? scope[""] : nil, String(decoding: qname, as: UTF8.self))
        }
        let prefix = String(decoding: qname[..<colon], as: UTF8.self)
        let local = qname[(colon + 1)...]
        guard !local.isEmpty, !prefix.isEmpty else { throw fail("an empty prefix or local name") }
        if prefix == "xml" { return ("http://www.w3.org/XML/1998/namespace", String(decoding: local, as: UTF8.self)) }
        guard let namespace = scope[prefix] else { throw fail("the prefix \(prefix.prefix(32)) is not declared") }
        return (namespace, String(decoding: local, as: UTF8.self))
    }

    mutating func qualifiedName() throws(XMLError) -> [UInt8] {
        let start = at
        while at < bytes.count, !isSpace(bytes[at]), !"/>=<\"'".utf8.contains(bytes[at]) { at += 1 }
        guard at > start else { throw fail("a name expected") }
        return Array(bytes[start..<at])
    }

    /// Text up to the next `<`, its references decoded.
    mutating func characterData() throws(XMLError) -> [UInt8] {
        let start = at
        while at < bytes.count, bytes[at] != UInt8(ascii: "<") { at += 1 }
        return try decode(bytes[start..<at], offset: start)
    }

    /// `&lt;` `&gt;` `&amp;` `&quot;` `&apos;` and `&#N;` `&#xN;` decoded; any other `&` refused.
    func decode(_ raw: ArraySlice<UInt8>, offset: Int) throws(XMLError) -> [UInt8] {
        guard raw.contains(UInt8(ascii: "&")) else { return Array(raw) }
        var out: [UInt8] = []
        var i = raw.startIndex
        while i < raw.endIndex {
            guard raw[i] == UInt8(ascii: "&") else {
                out.append(raw[i])
                i += 1
                continue
            }
            guard let end = raw[i...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
                throw .malformed(offset: i, "an & that starts no reference")
            }
            let name = String(decoding: raw[(i + 1)..<end], as: UTF8.self)
            switch name {
            case "lt": out.append(UInt8(ascii: "<"))
            case "gt": out.append(UInt8(ascii: ">"))
            case "amp": out.append(UInt8(ascii: "&"))
            case "quot": out.append(UInt8(ascii: "\""))
            case "apos": out.append(UInt8(ascii: "'"))
            default:
                let number: UInt32? =
                    if name.hasPrefix("#x") { UInt32(name.dropFirst(2), radix: 16) } else if name.hasPrefix("#") {
                        UInt32(name.dropFirst(), radix: 10)
                    } else { nil }
                guard let number, number != 0, let scalar = Unicode.Scalar(number) else {
                    throw .malformed(offset: i, "an unknown reference (no DTD is read)")
                }
                out += Array(String(Character(scalar)).utf8)
            }
            i = end + 1
        }
        return out
    }

    func starts(_ text: String) -> Bool {
        let pattern = Array(text.utf8)
        return bytes.count - at >= pattern.count && bytes[at..<(at + pattern.count)].elementsEqual(pattern)
    }

    /// Moves past the next `end`.
    mutating func skip(past end: [UInt8]) throws(XMLError) {
        while at + end.count <= bytes.count {
            if bytes[at..<(at + end.count)].elementsEqual(end) {
                at += end.count
                return
            }
            at += 1
        }
        throw fail("\(String(decoding: end, as: UTF8.self)) expected before the end")
    }

    mutating func skipSpace() {
        while at < bytes.count, isSpace(bytes[at]) { at += 1 }
    }
}

private func isSpace(_ byte: UInt8) -> Bool {
    byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
}
