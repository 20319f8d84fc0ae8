package dev.rig.aeron.auction;

import dev.rig.aeron.Reply;
import dev.rig.aeron.RigCodec;
import dev.rig.aeron.WireOrder;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * rig's orders as bids to Aeron's tutorial auction: the order id is the customer, its price the
 * bid, and the gateway's id rides in the bid's own correlation id, which the service echoes.
 * The auction has no cancel (rejected, reported as not supported) and no batch (the harness
 * splits batches).
 */
final class AuctionCodec implements RigCodec
{
    // The sample's message layout (its constants are package-private): a bid is correlation id,
    // customer id, price (i64 each); the answer adds a byte, 1 when the bid won.
    private static final int CORRELATION_ID_OFFSET = 0;
    private static final int CUSTOMER_ID_OFFSET = 8;
    private static final int PRICE_OFFSET = 16;
    private static final int BID_MESSAGE_LENGTH = 24;
    private static final int BID_SUCCEEDED_OFFSET = 24;
    private static final int EGRESS_MESSAGE_LENGTH = 25;

    @Override
    public int encodeOrder(final long correlationId, final WireOrder order, final MutableDirectBuffer out, final int offset)
    {
        out.putLong(offset + CORRELATION_ID_OFFSET, correlationId);
        out.putLong(offset + CUSTOMER_ID_OFFSET, order.id);
        out.putLong(offset + PRICE_OFFSET, order.price);
        return BID_MESSAGE_LENGTH;
    }

    @Override
    public long ingressCorrelationId(final DirectBuffer buffer, final int offset, final int length)
    {
        return buffer.getLong(offset + CORRELATION_ID_OFFSET);
    }

    @Override
    public boolean decodeEgress(final DirectBuffer buffer, final int offset, final int length, final Reply reply)
    {
        if (length < EGRESS_MESSAGE_LENGTH)
        {
            return false;
        }
        reply.correlationId = buffer.getLong(offset + CORRELATION_ID_OFFSET);
        // Applied either way: a bid that does not win leaves the auction as it was. A winning bid
        // counts as one filled.
        reply.status = Reply.OK;
        reply.filled = buffer.getByte(offset + BID_SUCCEEDED_OFFSET);
        return true;
    }
}
