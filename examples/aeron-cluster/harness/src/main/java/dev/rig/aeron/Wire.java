package dev.rig.aeron;

import java.nio.charset.StandardCharsets;
import org.agrona.MutableDirectBuffer;

/**
 * docs/wire.md's TCP client protocol: request types, statuses, sizes, and the response body.
 * Little-endian throughout, as Agrona's buffers are by default. Public for a service whose own
 * messages are docs/wire.md's (the example matching engine).
 */
public final class Wire
{
    public static final byte TYPE_ORDER = 1;
    public static final byte TYPE_CANCEL = 2;
    public static final byte TYPE_BATCH = 3;
    public static final byte TYPE_PING = 4;

    public static final byte STATUS_OK = 0;
    public static final byte STATUS_NOT_LEADER = 1;
    public static final byte STATUS_REJECTED = 2;
    public static final byte STATUS_ERROR = 3;

    public static final int MAX_FRAME = 16 * 1024 * 1024;
    public static final int ORDER_LEN = 31;
    public static final int REQUEST_HEADER = 9; // type + corr
    public static final int RESPONSE_FIXED = 36;

    private Wire()
    {
    }

    /** The payload length a request type must have, or -1 for an unknown type; batches say -2 (count-dependent). */
    static int payloadLength(final byte type)
    {
        switch (type)
        {
            case TYPE_ORDER:
                return ORDER_LEN;
            case TYPE_CANCEL:
                return 8;
            case TYPE_PING:
                return 0;
            case TYPE_BATCH:
                return -2;
            default:
                return -1;
        }
    }

    /** Why a request body is malformed, or null. */
    static String malformed(final byte[] body, final int len)
    {
        if (len < REQUEST_HEADER)
        {
            return "request of " + len + " bytes, want at least 9 (type, corr)";
        }
        final byte type = body[0];
        final int want = payloadLength(type);
        final int got = len - REQUEST_HEADER;
        if (want == -1)
        {
            return "unknown request type " + (type & 0xff) + ", want 1 order, 2 cancel, 3 batch or 4 ping";
        }
        if (want == -2)
        {
            if (got < 4)
            {
                return "batch payload of " + got + " bytes, want 4 + 31 x count";
            }
            final long count = (body[9] & 0xffL) | (body[10] & 0xffL) << 8 | (body[11] & 0xffL) << 16 | (body[12] & 0xffL) << 24;
            if (got != 4 + ORDER_LEN * count)
            {
                return "batch of " + count + " orders with a payload of " + got + " bytes, want " + (4 + ORDER_LEN * count);
            }
            return null;
        }
        if (got != want)
        {
            return "type " + type + " payload of " + got + " bytes, want " + want;
        }
        return null;
    }

    /** Writes a response body at offset; returns its length. */
    public static int response(
        final MutableDirectBuffer b, final int offset, final byte type, final long corr, final byte status,
        final long filled, final long rested, final long index, final String text)
    {
        final byte[] t = text == null ? new byte[0] : text.getBytes(StandardCharsets.UTF_8);
        final int tl = Math.min(t.length, 0xffff);
        b.putByte(offset, type);
        b.putLong(offset + 1, corr);
        b.putByte(offset + 9, status);
        b.putLong(offset + 10, filled);
        b.putLong(offset + 18, rested);
        b.putLong(offset + 26, index);
        b.putShort(offset + 34, (short)tl);
        b.putBytes(offset + RESPONSE_FIXED, t, 0, tl);
        return RESPONSE_FIXED + tl;
    }
}
