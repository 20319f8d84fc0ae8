package dev.rig.aeron;

/**
 * How long Admin's change watcher sleeps before its next check when nothing wakes it: a fast check
 * (FAST_NS) while the node is not settled (starting, or an election open: Aeron's election state is
 * not CLOSED) and for SETTLE_NS after a change, a slow one (STEADY_NS) otherwise. The consensus
 * module's counters (ChangeSignal) and the service's callbacks (NodeState.changed) wake it at once,
 * so the slow check only bounds what neither signals. Times are System.nanoTime() values, passed in.
 */
final class WatchPace
{
    static final long FAST_NS = 1_000_000L;
    static final long STEADY_NS = 50_000_000L;
    static final long SETTLE_NS = 100_000_000L;

    private long lastChangeNs;
    private boolean changedOnce;

    /** The sleep after a check at nowNs that found the node settled or not and changed or not. */
    long next(final long nowNs, final boolean settled, final boolean changed)
    {
        if (changed)
        {
            lastChangeNs = nowNs;
            changedOnce = true;
        }
        if (!settled || (changedOnce && nowNs - lastChangeNs < SETTLE_NS))
        {
            return FAST_NS;
        }
        return STEADY_NS;
    }
}
