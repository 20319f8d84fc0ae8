package dev.rig.aeron;

import java.lang.reflect.Field;
import java.lang.reflect.Method;

/**
 * The few Aeron and Agrona calls whose visibility or presence differs between the releases the
 * harness is built against (1.51.0 and 1.46.0: docs/engines.md), made by name so one source
 * compiles and runs on both. Everything else is called directly, and the counters are checked at
 * start (RigAeron.checkCounters).
 */
final class Compat
{
    private Compat()
    {
    }

    /**
     * An int a context holds, by its accessor's name: Archive.Context.fileSyncLevel() and its
     * catalog's, ConsensusModule.Context.fileSyncLevel() are public in Aeron 1.51.0 and package-private
     * in 1.46.0. -1 when there is no such accessor.
     */
    static int intOf(final Object ctx, final String accessor)
    {
        try
        {
            final Method m = ctx.getClass().getDeclaredMethod(accessor);
            m.setAccessible(true);
            return ((Number)m.invoke(ctx)).intValue();
        }
        catch (final ReflectiveOperationException | RuntimeException e)
        {
            return -1;
        }
    }

    /** Calls close() when the object has one (Agrona's ShutdownSignalBarrier has in the Agrona Aeron 1.51.0 bundles, and its hook holds the JVM until it is closed; not in 1.46.0's). */
    static void closeIfCloseable(final Object o)
    {
        try
        {
            o.getClass().getMethod("close").invoke(o);
        }
        catch (final ReflectiveOperationException e)
        {
            // an older Agrona: nothing holds the JVM
        }
    }

    /**
     * The idle strategy supplier a consensus module context was given (null: none, conclude picks
     * Aeron's default), read by name: the context has a setter and no getter for it.
     */
    @SuppressWarnings("unchecked")
    static java.util.function.Supplier<org.agrona.concurrent.IdleStrategy> idleStrategySupplier(final Object consensusModuleCtx)
    {
        try
        {
            final Field f = consensusModuleCtx.getClass().getDeclaredField("idleStrategySupplier");
            f.setAccessible(true);
            return (java.util.function.Supplier<org.agrona.concurrent.IdleStrategy>)f.get(consensusModuleCtx);
        }
        catch (final ReflectiveOperationException | RuntimeException e)
        {
            return null;
        }
    }

    private static volatile Field conductorField;
    private static volatile Field leaderMemberField;
    private static volatile boolean leaderUnreadable;

    /**
     * The member id of the leader the consensus module follows (ConsensusModuleAgent.leaderMember),
     * read by name: no counter or public accessor carries it (ClusterTool asks the consensus module
     * over its service stream). -1 when there is none, or when this Aeron has no such field (the
     * node then logs it once and reports the leader of the last new leadership term the service
     * saw).
     */
    static int leaderMemberId(final Object consensusModule)
    {
        if (leaderUnreadable || consensusModule == null)
        {
            return -1;
        }
        try
        {
            if (leaderMemberField == null)
            {
                final Field c = consensusModule.getClass().getDeclaredField("conductor");
                c.setAccessible(true);
                final Field l = c.getType().getDeclaredField("leaderMember");
                l.setAccessible(true);
                conductorField = c;
                leaderMemberField = l;
            }
            final Object agent = conductorField.get(consensusModule);
            final Object member = agent == null ? null : leaderMemberField.get(agent);
            return member == null ? -1 : ((io.aeron.cluster.ClusterMember)member).id();
        }
        catch (final ReflectiveOperationException | RuntimeException e)
        {
            leaderUnreadable = true;
            Log.warn("the consensus module's leader is not readable on Aeron " + Admin.AERON_VERSION + " (" + e +
                "): /status leader comes from the new leadership term events the service sees");
            return -1;
        }
    }
}
