package dev.rig.aeron;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * The one interface a user implements to put their ClusteredService under rig: rig's client
 * requests (docs/wire.md: order, cancel, batch) become the service's own ingress messages, and the
 * service's egress becomes rig's replies. The gateway's correlation id travels in a field of the
 * user's message that the codec chooses (all 64 bits: a single order's is its rig order id; the
 * service must echo it on its egress answer); rig adds
 * nothing to the log, so the service sees exactly the messages it sees in production.
 *
 * Encoders write at {@code out[offset..]} and return the length written, or {@link #UNSUPPORTED}
 * (the request is answered rejected and reported as not supported), or, for a batch,
 * {@link #SPLIT}: the gateway then sends each order of the batch as its own message through
 * {@link #encodeOrder} and answers the batch once every order is answered.
 */
public interface RigCodec
{
    /** The service has no such request: rig answers rejected and reports it as not supported. */
    int UNSUPPORTED = -1;
    /** Batch only: send the batch's orders one by one through {@link #encodeOrder}. */
    int SPLIT = -2;

    /** One order as the service's ingress message, carrying {@code correlationId}. */
    int encodeOrder(long correlationId, WireOrder order, MutableDirectBuffer out, int offset);

    /** A cancel of {@code orderId}, or {@link #UNSUPPORTED}. */
    default int encodeCancel(final long correlationId, final long orderId, final MutableDirectBuffer out, final int offset)
    {
        return UNSUPPORTED;
    }

    /**
     * A batch of {@code count} orders, each {@link WireOrder#LENGTH} bytes at {@code orders[ordersOffset..]} in
     * docs/wire.md's layout (read one with {@link WireOrder#read}), as one ingress message; or {@link #SPLIT}.
     */
    default int encodeBatch(
        final long correlationId, final DirectBuffer orders, final int ordersOffset, final int count, final MutableDirectBuffer out,
        final int offset)
    {
        return SPLIT;
    }

    /** The correlation id in one of the service's ingress messages (as the encoders wrote it). */
    long ingressCorrelationId(DirectBuffer buffer, int offset, int length);

    /**
     * Reads one egress message into {@code reply} (its correlation id, status, fills). Returns false
     * for a message that answers no rig request (the gateway ignores it).
     */
    boolean decodeEgress(DirectBuffer buffer, int offset, int length, Reply reply);
}
