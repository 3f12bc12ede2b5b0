/**
 * How long a Lease call can still be in flight after its wait bound: the network, a
 * client's deadline slack, a reply queued behind a commit. The SDK worker gives its
 * Lease calls a deadline of its wait plus this margin; the node therefore fences a
 * draining worker for `lease_wait_max` plus this margin (so a cancelled call that
 * arrives late cannot take a released task back).
 */
export const LEASE_CALL_IN_FLIGHT_MARGIN_MS = 15_000;
