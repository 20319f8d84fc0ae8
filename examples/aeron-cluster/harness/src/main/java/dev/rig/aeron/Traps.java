package dev.rig.aeron;

import io.aeron.cluster.service.ClientSession;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.agrona.DirectBuffer;
import org.agrona.ExpandableArrayBuffer;

/**
 * Ways the user's code misfits the harness, counted and named where they happen (/status traps,
 * engine.Traps) instead of surfacing later as something else: egress answers the codec matches to
 * no request the gateway sent (a wrong correlation id looks like a lost leader), and exceptions the
 * service throws on a message (a request that waits for an answer that never comes, then is resent).
 *
 * A service exception is answered to its request by the leader's decorator as a harness egress
 * message (ERROR_MAGIC, the correlation id, the text), which the gateway reads before the codec.
 */
final class Traps
{
    /** Starts the harness's error egress; no service message the gateway sees is expected to begin with these bytes. */
    static final long ERROR_MAGIC = 0x0150_4152_5447_4952L; // "RIGTRAP" and a version byte, little-endian

    /** The user's RigCodec class, named with every unmatched reply. */
    volatile String codec = "the codec";
    private final AtomicLong unmatched = new AtomicLong();
    private volatile long firstUnmatchedId;
    private final AtomicLong serviceErrors = new AtomicLong();
    private volatile String firstServiceError;

    /** An egress answer whose correlation id the gateway never sent: logged once, counted always. */
    void unmatched(final long id)
    {
        if (unmatched.getAndIncrement() == 0)
        {
            firstUnmatchedId = id;
            Log.warn("gateway: " + codec + ".decodeEgress returned correlation id " + id +
                ", which the gateway never sent: the codec must return the id its encoder wrote (RigCodec)");
        }
    }

    long unmatched()
    {
        return unmatched.get();
    }

    /** The service threw on a message: logged once, counted always (on every node that applied it). */
    String serviceError(final Throwable e, final long position)
    {
        final String text = "the service threw " + e.getClass().getName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
        if (serviceErrors.getAndIncrement() == 0)
        {
            firstServiceError = text;
            Log.error("the service threw on the message at log position " + position + " (answered to its request as rejected)", e);
        }
        return text;
    }

    long serviceErrors()
    {
        return serviceErrors.get();
    }

    /** Which traps have happened, for the change key: a change the first time each does. */
    List<String> kinds()
    {
        final List<String> out = new ArrayList<>(2);
        if (unmatched.get() > 0)
        {
            out.add("unmatched_replies");
        }
        if (serviceErrors.get() > 0)
        {
            out.add("service_errors");
        }
        return out;
    }

    /** The /status traps object (engine.Traps) with its trailing comma, or nothing while none happened. */
    void json(final StringBuilder sb)
    {
        if (kinds().isEmpty())
        {
            return;
        }
        sb.append("\"traps\":{");
        Json.field(sb, "codec", codec);
        final long u = unmatched.get();
        if (u > 0)
        {
            Json.field(sb, "unmatched_replies", u);
            Json.field(sb, "first_unmatched_id", firstUnmatchedId);
        }
        final long s = serviceErrors.get();
        if (s > 0)
        {
            Json.field(sb, "service_errors", s);
            Json.field(sb, "first_service_error", firstServiceError);
        }
        Json.close(sb);
        sb.append(',');
    }

    /** Answers one request from the leader's decorator: the gateway reads it as a rejection with text. */
    static void answerError(final ClientSession session, final long correlationId, final String text)
    {
        final byte[] t = text.getBytes(StandardCharsets.UTF_8);
        final int len = Math.min(t.length, 1000);
        final ExpandableArrayBuffer b = new ExpandableArrayBuffer(16 + len);
        b.putLong(0, ERROR_MAGIC);
        b.putLong(8, correlationId);
        b.putBytes(16, t, 0, len);
        // Offered once: a follower's session does not send, and a refused offer leaves the request
        // to the gateway's answer timeout as before.
        session.offer(b, 0, 16 + len);
    }

    /** Reads a harness error egress into reply; false for any other message (the codec's). */
    static boolean readError(final DirectBuffer b, final int off, final int len, final Reply reply)
    {
        if (len < 16 || b.getLong(off) != ERROR_MAGIC)
        {
            return false;
        }
        reply.correlationId = b.getLong(off + 8);
        reply.status = Reply.REJECTED;
        reply.text = b.getStringWithoutLengthUtf8(off + 16, len - 16);
        return true;
    }
}
