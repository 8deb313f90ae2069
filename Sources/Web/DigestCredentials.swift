import Media

/// What a client sent in `Authorization: Digest …` (RFC 7616; MD5, as the server asks): read
/// only to tell a wrong password from the other reasons the library refuses a response (a
/// nonce counter seen before, a nonce pushed out of its table, another URI), which are no
/// failed sign-in. The library itself checks every sign-in.
package struct DigestCredentials: Equatable, Sendable {
    /// The header's parameters, names in lower case, quoted values unquoted.
    package let parameters: [String: String]

    /// The parameters of `header`; nil when it is not Digest.
    package init?(header: String) {
        var text = Substring(header)
        while text.first == " " { text.removeFirst() }
        guard text.prefix(7).lowercased() == "digest ", let parsed = Self.parse(text.dropFirst(7)) else {
            return nil
        }
        parameters = parsed
    }

    /// Whether `response` is the one a client knowing `ha1` (MD5(user:realm:password)) sends
    /// for `method` and the `uri` it named: the password was right, whatever else was wrong.
    package func answers(ha1: [UInt8], method: String) -> Bool {
        guard let nonce = parameters["nonce"], let uri = parameters["uri"], let response = parameters["response"]
        else { return false }
        let ha2 = MD5.hex("\(method):\(uri)")
        let expected: String
        if let qop = parameters["qop"], !qop.isEmpty {
            guard let nc = parameters["nc"], let cnonce = parameters["cnonce"] else { return false }
            expected = MD5.hex("\(ha1.lowercaseHex):\(nonce):\(nc):\(cnonce):\(qop):\(ha2)")
        } else {
            expected = MD5.hex("\(ha1.lowercaseHex):\(nonce):\(ha2)")
        }
        return response.lowercased() == expected
    }

    /// `name=value, name="quoted \" value", …`; nil when it does not read so.
    private static func parse(_ text: Substring) -> [String: String]? {
        var parameters: [String: String] = [:]
        var rest = text
        func skip(_ characters: Set<Character>) {
            while let c = rest.first, characters.contains(c) { rest.removeFirst() }
        }
        while true {
            skip([" ", "\t", ","])
            if rest.isEmpty { return parameters }
            guard let equals = rest.firstIndex(of: "=") else { return nil }
            let name = rest[..<equals].trimmingSpaces.lowercased()
            guard !name.isEmpty else { return nil }
            rest = rest[rest.index(after: equals)...]
            skip([" ", "\t"])
            var value = ""
            if rest.first == "\"" {
                guard let quoted = rest.quotedString() else { return nil }
                (value, rest) = quoted
            } else {
                let end = rest.firstIndex(of: ",") ?? rest.endIndex
                value = rest[..<end].trimmingSpaces
                rest = rest[end...]
            }
            parameters[name] = value
        }
    }
}
