import CV4L2
import Foundation
import Glibc

/// The kernel's virtual video test driver, driven the way a test needs: its controls (test
/// pattern, movement, dropped buffers, injected errors), and unplugging it (unbinding the
/// platform device, which is what a USB disconnect looks like to an application).
enum Vivid {
    static let node = "/dev/video0"
    /// A stable name, as udev makes for a USB camera (the VM has no udev: the test makes it).
    static let byIdLink = "/dev/v4l/by-id/platform-vivid-000-video-index0"
    static let platformDevice = "vivid.0"
    static let driverDirectory = "/sys/bus/platform/drivers/vivid"

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Menu values of the "Test Pattern" control.
    enum Pattern: Int32 {
        case colorbar75 = 0
        case black = 5
        case white = 6
    }

    /// Menu values of "Horizontal Movement".
    enum Movement: Int32 {
        case none = 3
        case fastRight = 6
    }

    /// Sets a control by its v4l2-ctl name (`test_pattern`, `percentage_of_dropped_buffers`).
    /// A button control is pressed whatever the value.
    static func set(_ name: String, _ value: Int32, node: String = node) throws(Failure) {
        try Control(name, node: node).set(value)
    }

    /// One control, looked up once, so that setting it is a single ioctl (timed tests set it
    /// at a chosen instant).
    final class Control {
        let fd: Int32
        let id: UInt32
        let name: String

        init(_ name: String, node: String = Vivid.node) throws(Failure) {
            self.name = name
            fd = open(node, O_RDWR | O_CLOEXEC)
            guard fd >= 0 else {
                throw Failure(description: "cannot open \(node): \(String(cString: strerror(errno)))")
            }
            do { id = try controlID(named: name, fd: fd) } catch {
                if close(fd) != 0 { /* released anyway */  }
                throw error
            }
        }

        deinit { if close(fd) != 0 { /* released anyway */  } }

        func set(_ value: Int32) throws(Failure) {
            var control = v4l2_control(id: id, value: value)
            guard CV4L2_ioctl(fd, CV4L2_VIDIOC_S_CTRL, &control) == 0 else {
                throw Failure(description: "VIDIOC_S_CTRL \(name)=\(value): \(String(cString: strerror(errno)))")
            }
        }
    }

    static func controlID(named wanted: String, fd: Int32) throws(Failure) -> UInt32 {
        var query = v4l2_queryctrl()
        query.id = CV4L2_CTRL_FLAG_NEXT_CTRL
        while CV4L2_ioctl(fd, CV4L2_VIDIOC_QUERYCTRL, &query) == 0 {
            if ctlName(string(query.name)) == wanted { return query.id }
            query.id |= CV4L2_CTRL_FLAG_NEXT_CTRL
        }
        throw Failure(description: "vivid has no control \(wanted)")
    }

    /// v4l2-ctl's name for a control: lower case, runs of other characters as one `_`.
    static func ctlName(_ name: String) -> String {
        var out = ""
        for c in name.lowercased() {
            if c.isLetter || c.isNumber {
                out.append(c)
            } else if !out.isEmpty && !out.hasSuffix("_") {
                out.append("_")
            }
        }
        while out.hasSuffix("_") { out.removeLast() }
        return out
    }

    static func string<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    /// Puts the picture back to a still colour bar, nothing dropped, nothing moving.
    static func reset() throws(Failure) {
        try set("test_pattern", Pattern.colorbar75.rawValue)
        try set("horizontal_movement", Movement.none.rawValue)
        try set("percentage_of_dropped_buffers", 0)
        // No on-screen counters: the picture is still unless a test moves it.
        try set("osd_text_mode", 2)
    }

    /// The device disappears as a camera does when its cable is pulled: open descriptors stay,
    /// every call on them fails, the node goes away.
    static func unplug() throws(Failure) { try write(platformDevice, to: driverDirectory + "/unbind") }

    /// And comes back, as a replugged camera does (a new node, same name).
    static func replug() throws(Failure) {
        try write(platformDevice, to: driverDirectory + "/bind")
        try waitForNode()
    }

    /// Unloads and reloads the module (`modprobe -r vivid; modprobe vivid`): only possible
    /// once nobody has the device open.
    static func reloadModule() -> (unloaded: Bool, loaded: Bool) {
        let unloaded = run("/sbin/modprobe", ["-r", "vivid"]) == 0
        let loaded = run("/sbin/modprobe", ["vivid"]) == 0
        if loaded { try? waitForNode() }
        return (unloaded, loaded)
    }

    static func makeByIdLink() throws(Failure) {
        do {
            try FileManager.default.createDirectory(atPath: "/dev/v4l/by-id", withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: byIdLink)
            try FileManager.default.createSymbolicLink(atPath: byIdLink, withDestinationPath: "../../video0")
        } catch {
            throw Failure(description: "cannot make \(byIdLink): \(error)")
        }
    }

    static func waitForNode() throws(Failure) {
        for _ in 0..<50 {
            if access(node, R_OK | W_OK) == 0 { return }
            usleep(100_000)
        }
        throw Failure(description: "\(node) did not come back")
    }

    private static func write(_ text: String, to path: String) throws(Failure) {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { if close(fd) != 0 { /* released anyway */  } }
        let n = text.withCString { Glibc.write(fd, $0, strlen($0)) }
        guard n == text.utf8.count else {
            throw Failure(description: "writing \(text) to \(path): \(String(cString: strerror(errno)))")
        }
    }

    @discardableResult
    static func run(_ program: String, _ arguments: [String]) -> Int32 {
        (try? Child.run(program, arguments).status) ?? -1
    }
}
