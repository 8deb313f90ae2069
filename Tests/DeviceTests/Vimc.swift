import Foundation
import Glibc

/// The kernel's virtual media controller driver (vimc, built out of tree by
/// scripts/vm/build-vimc.sh), as libcamera sees it: one camera, "platform/vimc.0 Sensor B",
/// behind a sensor, a debayer and a scaler. Its picture comes from the sensor subdevice's test
/// pattern; unbinding the platform device is the camera going away.
enum Vimc {
    static let cameraID = "platform/vimc.0 Sensor B"
    static let platformDevice = "vimc.0"
    static let driverDirectory = "/sys/bus/platform/drivers/vimc"

    /// Loads vimc.ko from `VIGIL_VIMC_DIR`, with udevd running first: libcamera finds only the
    /// devices udev has initialized, and learns that a camera went or came from udev's events.
    /// Returns once `cam -l` lists the camera.
    static func load() throws(Vivid.Failure) {
        guard let directory = ProcessInfo.processInfo.environment["VIGIL_VIMC_DIR"] else {
            throw Vivid.Failure(description: "VIGIL_VIMC_DIR is not set (scripts/device-tests.sh sets it)")
        }
        if access("/run/udev/control", F_OK) != 0 {
            try? FileManager.default.createDirectory(atPath: "/run/udev", withIntermediateDirectories: true)
            guard Vivid.run("/lib/systemd/systemd-udevd", ["--daemon", "--resolve-names=never"]) == 0 else {
                throw Vivid.Failure(
                    description: "systemd-udevd did not start (is udev installed on the host? make deps installs it)")
            }
        }
        _ = Vivid.run("/sbin/modprobe", ["v4l2-tpg"])
        guard access(driverDirectory, F_OK) == 0 || Vivid.run("/sbin/insmod", [directory + "/vimc.ko"]) == 0 else {
            throw Vivid.Failure(description: "insmod \(directory)/vimc.ko failed")
        }
        try waitForCamera(present: true)
    }

    /// `cam -l`'s camera ids.
    static func listed() -> [String] {
        let output = (try? Child.run("/usr/bin/cam", ["-l"]).stdout) ?? ""
        // "1: 'Sensor B' (platform/vimc.0 Sensor B)"
        return output.split(separator: "\n").compactMap { line in
            guard line.first?.isNumber == true, line.hasSuffix(")"), let open = line.lastIndex(of: "(") else {
                return nil
            }
            return String(line[line.index(after: open)..<line.index(before: line.endIndex)])
        }
    }

    static func waitForCamera(present: Bool) throws(Vivid.Failure) {
        for _ in 0..<100 {
            Vivid.run("/bin/udevadm", ["settle", "-t", "5"])
            if listed().contains(cameraID) == present { return }
            usleep(200_000)
        }
        throw Vivid.Failure(description: "cam -l does \(present ? "not list" : "still list") \(cameraID)")
    }

    static func unbind() throws(Vivid.Failure) { try write(platformDevice, to: driverDirectory + "/unbind") }
    static func bind() throws(Vivid.Failure) { try write(platformDevice, to: driverDirectory + "/bind") }

    /// The sensor subdevice, whose "Test Pattern" control makes the picture.
    static func sensorNode() throws(Vivid.Failure) -> String { try node("v4l-subdev", named: "Sensor B") }

    /// The capture node libcamera streams from (what `libcamerify` maps a V4L2 open onto).
    static func captureNode() throws(Vivid.Failure) -> String { try node("video", named: "RGB/YUV Capture") }

    /// The /dev node of vimc's entity `name` (its /sys/class/video4linux/PREFIXn/name).
    static func node(_ prefix: String, named name: String) throws(Vivid.Failure) -> String {
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/sys/class/video4linux")) ?? []
        where entry.hasPrefix(prefix) {
            let text = (try? String(contentsOfFile: "/sys/class/video4linux/\(entry)/name", encoding: .utf8)) ?? ""
            if text.trimmingCharacters(in: .whitespacesAndNewlines) == name { return "/dev/" + entry }
        }
        throw Vivid.Failure(description: "vimc's \(name) node is not there")
    }

    static func setPattern(_ pattern: Vivid.Pattern) throws(Vivid.Failure) {
        try Vivid.Control("test_pattern", node: sensorNode()).set(pattern.rawValue)
    }

    private static func write(_ text: String, to path: String) throws(Vivid.Failure) {
        do { try text.write(toFile: path, atomically: false, encoding: .utf8) } catch {
            throw Vivid.Failure(description: "writing \(text) to \(path): \(error)")
        }
    }
}
