package dev.rig.aeron;

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
}
