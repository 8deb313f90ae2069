/// Text put into XML or HTML (the analysis plot's SVG, the web server's page): the characters
/// markup gives meaning escaped, and the control characters XML 1.0 forbids made `?`.
public enum MarkupText {
    private static let entities: [Unicode.Scalar: String] = [
        "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&apos;",
    ]

    public static func escaped(_ text: String) -> String {
        text.replacingScalars { c in
            entities[c] ?? (c.value < 0x20 && c != "\t" && c != "\n" && c != "\r" ? "?" : nil)
        }
    }
}
