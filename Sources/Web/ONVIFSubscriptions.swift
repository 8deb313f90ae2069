import ONVIF
import Synchronization

/// The events service's pull point subscriptions: motion as ONVIF events, for Home Assistant
/// and NVRs. Each subscription queues the motion changes the agent says (`motion`) until its
/// subscriber pulls them, and ends at its termination time unless renewed. Bounded: at most
/// `limit` subscriptions (a new one past it pushes out the one ending soonest) and `queued`
/// changes each (the oldest dropped). A pull answers at once with what is queued, nothing when
/// nothing is (no long poll: the answer never waits on the polling thread; a subscriber pulls
/// again, Home Assistant within a second).
final class ONVIFSubscriptions: Sendable {
    static let limit = 8
    static let queued = 64

    struct Subscription {
        var termination: Double
        var queue: [ONVIFEvents.Motion]
    }

    struct State {
        var next = 1
        var subscriptions: [Int: Subscription] = [:]
        var moving = false
    }

    let state = Mutex(State())

    /// The agent said motion started (`moving`) or ended at `at`.
    func motion(_ moving: Bool, at: Double) {
        state.withLock { s in
            s.moving = moving
            s.subscriptions = s.subscriptions.filter { $0.value.termination > at }
            for id in s.subscriptions.keys {
                s.subscriptions[id]?.queue.append(ONVIFEvents.Motion(moving: moving, at: at))
                if let count = s.subscriptions[id]?.queue.count, count > Self.queued {
                    s.subscriptions[id]?.queue.removeFirst(count - Self.queued)
                }
            }
        }
    }

    /// A new subscription until `termination`, told the state as it is now: its id.
    func create(termination: Double, now: Double) -> Int {
        state.withLock { s in
            s.subscriptions = s.subscriptions.filter { $0.value.termination > now }
            if s.subscriptions.count >= Self.limit,
                let soonest = s.subscriptions.min(by: { $0.value.termination < $1.value.termination })
            {
                s.subscriptions.removeValue(forKey: soonest.key)
            }
            let id = s.next
            s.next += 1
            s.subscriptions[id] = Subscription(
                termination: termination, queue: [ONVIFEvents.Motion(moving: s.moving, at: now, initial: true)])
            return id
        }
    }

    /// Up to `limit` of subscription `id`'s queued changes, oldest first, and its termination;
    /// nil when it is not there (ended).
    func pull(_ id: Int, limit: Int, now: Double) -> (messages: [ONVIFEvents.Motion], termination: Double)? {
        state.withLock { s in
            guard var subscription = s.subscriptions[id], subscription.termination > now else {
                s.subscriptions.removeValue(forKey: id)
                return nil
            }
            let taken = Array(subscription.queue.prefix(max(1, limit)))
            subscription.queue.removeFirst(taken.count)
            s.subscriptions[id] = subscription
            return (taken, subscription.termination)
        }
    }

    /// Subscription `id` now ends at `termination`; false when it is not there.
    func renew(_ id: Int, termination: Double, now: Double) -> Bool {
        state.withLock { s in
            guard let subscription = s.subscriptions[id], subscription.termination > now else { return false }
            s.subscriptions[id]?.termination = termination
            return true
        }
    }

    /// Subscription `id` ends now; false when it was not there.
    func unsubscribe(_ id: Int) -> Bool { state.withLock { $0.subscriptions.removeValue(forKey: id) != nil } }

    /// Subscription `id` is told the state as it is now (a synchronization point); false when
    /// it is not there.
    func synchronize(_ id: Int, now: Double) -> Bool {
        state.withLock { s in
            guard s.subscriptions[id] != nil else { return false }
            s.subscriptions[id]?.queue.append(ONVIFEvents.Motion(moving: s.moving, at: now, initial: true))
            return true
        }
    }

    /// What subscription `id`'s request (`operation`, in the pull point's service) is answered.
    func answer(_ operation: XMLElement, id: Int?, now: Double) -> SOAPReply {
        guard let id else { return ONVIFEvents.noSubscription() }
        switch (operation.namespace, operation.name) {
        case (ONVIFEvents.namespace, "PullMessages"):
            let limit = operation.child("MessageLimit").flatMap { Int($0.trimmedText) } ?? 100
            guard let pulled = pull(id, limit: min(limit, Self.queued), now: now) else {
                return ONVIFEvents.noSubscription()
            }
            return ONVIFEvents.pulled(pulled.messages, now: now, termination: pulled.termination)
        case (ONVIFEvents.notification, "Renew"):
            let termination = ONVIFEvents.termination(operation.child("TerminationTime")?.text, now: now)
            guard renew(id, termination: termination, now: now) else { return ONVIFEvents.noSubscription() }
            return ONVIFEvents.renewed(now: now, termination: termination)
        case (ONVIFEvents.notification, "Unsubscribe"):
            return unsubscribe(id) ? ONVIFEvents.unsubscribed() : ONVIFEvents.noSubscription()
        case (ONVIFEvents.namespace, "SetSynchronizationPoint"):
            return synchronize(id, now: now) ? ONVIFEvents.synchronized() : ONVIFEvents.noSubscription()
        default:
            return .actionNotSupported(operation.name)
        }
    }
}
