package dev.rig.aeron;

/**
 * Optional: what the harness may ask of the user's service state, always on the service thread
 * (from the decorator's doBackgroundWork), so the service needs no locks. A method left at its
 * default is reported by rig as not supported (GET /status unsupported, `rig check`, the report),
 * never as a zero:
 * <ul>
 * <li>no {@link #stateHash}: the harness hashes the bytes the service writes into each snapshot,
 * which every node takes at one log position, and /status reports that hash with the position
 * (state_hash_index);</li>
 * <li>no {@link #restingOrders}: /status orders is 0 and listed as unsupported;</li>
 * <li>no {@link #heldOrderIds}: GET /orders answers from the correlation ids of the ingress each
 * node applied (AppliedRecord, check "applied ingress"), so lost orders are still checked.</li>
 * </ul>
 */
public interface Introspection
{
    /** Returned by a method the service does not support. */
    long UNSUPPORTED = Long.MIN_VALUE;

    /** A hash of the state that is equal on every node that applied the same log. */
    default long stateHash()
    {
        return UNSUPPORTED;
    }

    /** How many orders rest in the book. */
    default long restingOrders()
    {
        return UNSUPPORTED;
    }

    /**
     * The ids of the single orders applied since the node's restored snapshot, as closed ranges
     * {lo, hi} ascending (engine.HeldOrders); null when not supported.
     */
    default long[][] heldOrderIds()
    {
        return null;
    }
}
