package dev.rig.aeron;

/**
 * An error a loop may hit on every turn (the admin watcher's 1 ms change check): logged once with
 * its stack trace when it first happens, then counted, and the count logged when the loop gets
 * through again or hits another error, so engine.log gets a line per episode, not per turn.
 */
final class RepeatedError
{
    private final String what;
    private String current; // the error being counted, as Throwable.toString(); null while the loop gets through
    private long count;

    RepeatedError(final String what)
    {
        this.what = what;
    }

    /** One failed turn. */
    void failed(final Throwable t)
    {
        final String s = t.toString();
        if (s.equals(current))
        {
            count++;
            return;
        }
        ok();
        current = s;
        count = 1;
        Log.error(what + " (logged once; repeats are counted)", t);
    }

    /** One turn that got through: ends an episode, logging how often it failed. */
    void ok()
    {
        if (current != null)
        {
            Log.warn(what + " failed " + count + (count == 1 ? " time" : " times") + " in a row: " + current);
            current = null;
            count = 0;
        }
    }
}
