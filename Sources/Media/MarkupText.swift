/// Text put into XML or HTML (the analysis plot's SVG, the web server's page): the characters
/// markup gives meaning escaped, and the control characters XML 1.0 forbids made `?`.
public enum MarkupText {
    public static func escaped(_ text: String) -> String {
        var s = ""
        for c in text.unicodeScalars {
            switch c {
            case "&": s += "&amp;"
            case "<": s += "&lt;"
            case ">": s += "&gt;"
            case "\"": s += "&quot;"
            case "'": s += "&apos;"
            default:
                if c.value < 0x20 && c != "\t" && c != "\n" && c != "\r" {
                    s += "?"
                } else {
                    s.unicodeScalars.append(c)
                }
            }
        }
        return s
    }
}
