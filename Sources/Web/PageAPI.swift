import FoundationEssentials
import Recorder

// What the page's script asks beside the page: `/api/now` (what it polls) and `POST
// /api/detection` (its detection button; `curl` may ask it too).
extension WebSite {
    /// `/api/now`: whether a clip is being recorded, a motion event is open and detection is
    /// on, and the newest clip (its path): a few bytes a poll, one indexed question.
    func now() -> HTTPResponse {
        let newest: String?
        do throws(CatalogueError) {
            newest = try openedCatalogue().page(ClipQuery(limit: 1)).entries.first?.file
        } catch {
            forgetCatalogue()
            return .error(503, "The clip catalogue cannot be read now (\(error.description)); try again in a moment.")
        }
        let counters = context.counters
        let json =
            "{\"recording\":\(counters.recording),\"motion\":\(motion.load(ordering: .relaxed)),"
            + "\"detection\":\(context.requests.detectionEnabled),\"newest\":\(newest.map(Self.jsonString) ?? "null")}\n"
        return .text(200, json, type: "application/json", headers: [("Cache-Control", "no-store")])
    }

    /// `POST /api/detection`: motion detection on or off, for `{"enabled": true|false}`, as
    /// MQTT's detection command does. JSON only, as `/api/trigger`: a form another site makes a
    /// browser send cannot be.
    func detection(_ request: HTTPRequest) -> HTTPResponse {
        guard request.method == "POST" else {
            return .methodNotAllowed(
                "Turn detection on or off with POST (curl -X POST -H 'Content-Type: application/json' -d '{\"enabled\": false}' …/api/detection).",
                allowed: "POST")
        }
        guard request.mediaType == "application/json" else {
            return .error(
                415, "Send the request as JSON: Content-Type: application/json, a body such as {\"enabled\": false}.")
        }
        struct Asked: Decodable { var enabled: Bool }
        guard let asked = try? JSONDecoder().decode(Asked.self, from: Data(request.body)) else {
            return .error(
                400, "The body is not a JSON object with \"enabled\" true or false: send {\"enabled\": false}.")
        }
        context.requests.setDetection(asked.enabled, by: "web")
        return .text(
            202, "{\"detection\":\(asked.enabled)}\n", type: "application/json",
            headers: [("Cache-Control", "no-store")])
    }
}
