extension String {
    /// The path without its last component, as `NSString.deletingLastPathComponent` gave it:
    /// repeated slashes are taken as one, a trailing slash is ignored, "/" stays "/", and a
    /// name with no directory gives "" (where Foundation trapped).
    public var withoutLastPathComponent: String {
        var path = ""
        for ch in self where !(ch == "/" && path.last == "/") { path.append(ch) }
        if path.count > 1 && path.last == "/" { path.removeLast() }
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
