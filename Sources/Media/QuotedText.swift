extension String {
    /// This text with every Unicode scalar `replacement` gives words for replaced by them, the
    /// others kept: the one escaping loop of a logfmt value, of markup and of what else escapes.
    public func replacingScalars(_ replacement: (Unicode.Scalar) -> String?) -> String {
        var out = ""
        for scalar in unicodeScalars {
            if let replaced = replacement(scalar) {
                out += replaced
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

extension Substring {
    /// The quoted string this text starts with, as HTTP's quoted-string and a logfmt value write
    /// one: from the opening `"` to the closing one, a `\` taking the next character as it is.
    /// Its value, and the text after the closing quote; nil when the text starts with no quote
    /// or the quote never closes.
    public func quotedString() -> (value: String, rest: Substring)? {
        guard first == "\"" else { return nil }
        var value = ""
        var escaped = false
        var index = self.index(after: startIndex)
        while index < endIndex {
            let c = self[index]
            index = self.index(after: index)
            if escaped {
                value.append(c)
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else if c == "\"" {
                return (value, self[index...])
            } else {
                value.append(c)
            }
        }
        return nil
    }
}
