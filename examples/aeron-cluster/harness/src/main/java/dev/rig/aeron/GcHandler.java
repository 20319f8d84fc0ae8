package dev.rig.aeron;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;

/**
 * POST /gc (engine.AdminGC, engine/contract.go): System.gc() now, answered as engine.GCAnswer
 * (wall_ms, collections, pause_ms from the GC beans). rig's gc action calls it to provoke a GC
 * pause on purpose, which the analysis then names from the GC log. Its own context on the admin
 * server, with the same bearer token as the rest of the admin API (Admin).
 */
final class GcHandler implements HttpHandler
{
    static final String PATH = "/gc";

    private final byte[] token;

    GcHandler(final byte[] token)
    {
        this.token = token.clone();
    }

    @Override
    public void handle(final HttpExchange ex) throws IOException
    {
        try
        {
            if (!Admin.authorized(ex, token))
            {
                return;
            }
            if (!ex.getRequestMethod().equals("POST") || !ex.getRequestURI().getPath().equals(PATH))
            {
                Admin.reply(ex, 404, "{\"error\":" + Json.str("no " + ex.getRequestMethod() + " " + ex.getRequestURI().getPath() + "; want POST /gc") + "}");
                return;
            }
            long count0 = 0, time0 = 0;
            for (final GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans())
            {
                count0 += Math.max(0, b.getCollectionCount());
                time0 += Math.max(0, b.getCollectionTime());
            }
            final long t0 = System.nanoTime();
            System.gc();
            final long wallNs = System.nanoTime() - t0;
            long count1 = 0, time1 = 0;
            for (final GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans())
            {
                count1 += Math.max(0, b.getCollectionCount());
                time1 += Math.max(0, b.getCollectionTime());
            }
            Admin.reply(ex, 200, "{\"wall_ms\":" + (wallNs / 1e6) + ",\"collections\":" + (count1 - count0) + ",\"pause_ms\":" + (time1 - time0) + "}");
        }
        finally
        {
            ex.close();
        }
    }
}
