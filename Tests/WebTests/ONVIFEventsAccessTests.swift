import Foundation
import ONVIF
import TestSupport
import Testing

@testable import Web

/// The events service's pull points through the real server: a user creates one (its address
/// through the host the client used), pulls the state, renews, unsubscribes; anyone else is
/// asked to sign in; an ended subscription is a fault. Bounded: eight subscriptions, the one
/// ending soonest pushed out by a ninth, 64 changes queued each.
@Suite struct ONVIFEventsAccessTests {
    static func request(
        _ operation: String, namespace: String, arguments: String = "", signedIn: Bool = true
    )
        -> String
    {
        let token =
            signedIn
            ? "<wsse:Security xmlns:wsse=\"\(Namespace.security)\"><wsse:UsernameToken>\(ONVIFAccessTests.text("right"))</wsse:UsernameToken></wsse:Security>"
            : ""
        return """
            <?xml version="1.0"?><s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Header>\(token)</s:Header><s:Body><e:\(operation) xmlns:e="\(namespace)">\(arguments)</e:\(operation)></s:Body></s:Envelope>
            """
    }

    static func post(_ server: HTTPServer, _ path: String, _ body: String) throws -> (status: Int, body: String) {
        let r = try HTTPServerTests.curl(
            server, path, ["-X", "POST", "-H", "Content-Type: application/soap+xml", "--data-binary", body])
        return (r.status, String(decoding: r.body, as: UTF8.self))
    }

    @Test func aUserSubscribesPullsRenewsAndUnsubscribes() throws {
        let clock = ManualClock(.s(1000))
        let server = try ONVIFAccessTests.server(clock)
        defer { server.stop() }
        let create = Self.request(
            "CreatePullPointSubscription", namespace: ONVIFEvents.namespace,
            arguments: "<e:InitialTerminationTime>PT60S</e:InitialTerminationTime>")
        let refused = try Self.post(
            server, "/onvif/events_service",
            Self.request("CreatePullPointSubscription", namespace: ONVIFEvents.namespace, signedIn: false))
        #expect(refused.status == 401 && refused.body.contains("ter:NotAuthorized"))
        let created = try Self.post(server, "/onvif/events_service", create)
        #expect(created.status == 200, "\(created)")
        let address = "http://127.0.0.1:\(server.port)/onvif/pullpoint?subscription=1"
        #expect(created.body.contains("<wsa5:Address>\(address)</wsa5:Address>"), "\(created.body)")
        #expect(created.body.contains("<wsnt:TerminationTime>2026-12-07T14:01:00Z</wsnt:TerminationTime>"))

        let path = "/onvif/pullpoint?subscription=1"
        let pull = Self.request(
            "PullMessages", namespace: ONVIFEvents.namespace,
            arguments: "<e:Timeout>PT5S</e:Timeout><e:MessageLimit>10</e:MessageLimit>")
        let unsigned = Self.request("PullMessages", namespace: ONVIFEvents.namespace, signedIn: false)
        #expect(try Self.post(server, path, unsigned).status == 401)
        let first = try Self.post(server, path, pull)
        #expect(first.status == 200 && first.body.contains("Name=\"IsMotion\" Value=\"false\""), "\(first)")
        let second = try Self.post(server, path, pull)
        #expect(second.status == 200 && !second.body.contains("NotificationMessage"), "nothing new: \(second)")
        let renewed = try Self.post(
            server, path,
            Self.request(
                "Renew", namespace: ONVIFEvents.notification,
                arguments: "<e:TerminationTime>PT120S</e:TerminationTime>"))
        #expect(renewed.body.contains("<wsnt:TerminationTime>2026-12-07T14:02:00Z</wsnt:TerminationTime>"))
        #expect(
            try Self.post(server, path, Self.request("Unsubscribe", namespace: ONVIFEvents.notification)).status == 200)
        let gone = try Self.post(server, path, pull)
        #expect(gone.status == 400 && gone.body.contains("ter:InvalidSubscription"), "\(gone)")
        let none = try Self.post(server, "/onvif/pullpoint", pull)
        #expect(none.status == 400 && none.body.contains("ter:InvalidSubscription"))
    }

    @Test func subscriptionsAndTheirQueuesAreBounded() {
        let subscriptions = ONVIFSubscriptions()
        let now = 1_796_652_000.0
        let ids = (0..<9).map { subscriptions.create(termination: now + 60 + Double($0), now: now) }
        #expect(subscriptions.pull(ids[0], limit: 100, now: now) == nil, "the one ending soonest went")
        #expect(subscriptions.pull(ids[8], limit: 100, now: now)?.messages.count == 1)
        for i in 0..<100 { subscriptions.motion(i % 2 == 0, at: now + Double(i) / 100) }
        let queued = subscriptions.pull(ids[8], limit: 1000, now: now + 1)?.messages ?? []
        #expect(queued.count == ONVIFSubscriptions.queued && queued.last?.moving == false, "the newest kept")
        #expect(subscriptions.pull(ids[1], limit: 100, now: now + 62) == nil, "past its termination")
    }
}
