import Media
import Testing

@Suite struct PathTests {
    /// What `NSString.deletingLastPathComponent` gave for the same paths.
    @Test(arguments: [
        ("/var/clips/2026-11-30/shed-20261130-110405.mov", "/var/clips/2026-11-30"),
        ("/var/clips//2026-11-30/x.mov", "/var/clips/2026-11-30"),
        ("/etc/vigil/", "/etc"),
        ("/a//b//", "/a"),
        ("/a", "/"),
        ("//a", "/"),
        ("/", "/"),
        ("clips/x.mov", "clips"),
        ("./x.mov", "."),
        ("../x", ".."),
        ("", ""),
    ])
    func withoutLastPathComponent(path: String, parent: String) {
        #expect(path.withoutLastPathComponent == parent)
    }

    @Test func aNameWithoutADirectoryHasNone() {
        #expect("x.mov".withoutLastPathComponent == "")
        #expect("x/".withoutLastPathComponent == "")
    }
}
