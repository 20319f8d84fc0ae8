package dev.rig.aeron;

import io.aeron.cluster.ConsensusModule;
import io.aeron.cluster.service.ClusteredServiceContainer;
import java.util.function.Supplier;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * The consensus module's idle strategy, wrapped: after each duty cycle it reads the counters the
 * change watcher follows (election state, node role, snapshot count) and wakes the watcher when one
 * moved. Aeron calls no service back when a follower leaves CLOSED to canvass, so this is how an
 * election's first step reaches GET /changes within a duty cycle and a thread wake while the watcher
 * sleeps between slow checks (WatchPace). A check is three volatile loads and allocates nothing.
 */
final class ChangeSignal implements IdleStrategy
{
    private final IdleStrategy inner;
    private final Supplier<AtomicCounter[]> find;
    private final Runnable wake;
    private AtomicCounter[] counters;
    private long[] last;

    /** find gives the counters once they exist (null before); wake is called on the idling thread. */
    ChangeSignal(final IdleStrategy inner, final Supplier<AtomicCounter[]> find, final Runnable wake)
    {
        this.inner = inner;
        this.find = find;
        this.wake = wake;
    }

    /**
     * Wraps the idle strategy the consensus module would use (the one its context was given, else
     * Aeron's default, as conclude picks it) so it wakes the watcher through wake.
     */
    static void install(final ConsensusModule.Context cm, final Runnable wake)
    {
        final Supplier<IdleStrategy> given = Compat.idleStrategySupplier(cm);
        final Supplier<IdleStrategy> base = given != null ? given : ClusteredServiceContainer.Configuration.idleStrategySupplier(null);
        cm.idleStrategySupplier(() -> new ChangeSignal(base.get(), () ->
        {
            final AtomicCounter e = cm.electionStateCounter();
            final AtomicCounter r = cm.clusterNodeRoleCounter();
            final AtomicCounter s = cm.snapshotCounter();
            return e == null || r == null || s == null ? null : new AtomicCounter[] {e, r, s};
        }, wake));
    }

    /** Reads the counters; wakes when one differs from the last read. */
    void check()
    {
        AtomicCounter[] c = counters;
        if (c == null)
        {
            c = find.get();
            if (c == null)
            {
                return;
            }
            last = new long[c.length];
            for (int i = 0; i < c.length; i++)
            {
                last[i] = c[i].get();
            }
            counters = c;
            wake.run();
            return;
        }
        boolean moved = false;
        for (int i = 0; i < c.length; i++)
        {
            final long v = c[i].get();
            if (v != last[i])
            {
                last[i] = v;
                moved = true;
            }
        }
        if (moved)
        {
            wake.run();
        }
    }

    public void idle(final int workCount)
    {
        check();
        inner.idle(workCount);
    }

    public void idle()
    {
        check();
        inner.idle();
    }

    public void reset()
    {
        inner.reset();
    }

    public String alias()
    {
        return inner.alias();
    }

    public String toString()
    {
        return inner.toString();
    }
}
