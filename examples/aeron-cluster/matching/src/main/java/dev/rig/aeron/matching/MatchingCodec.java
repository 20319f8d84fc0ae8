package dev.rig.aeron.matching;

import dev.rig.aeron.Reply;
import dev.rig.aeron.RigCodec;
import dev.rig.aeron.Wire;
import dev.rig.aeron.WireOrder;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * rig's requests to the matching service and back. Its log messages are docs/wire.md request
 * bodies, so the codec copies each request with the gateway's id in the wire corr field, and
 * reads the id back from the wire response the service answers with. Batches go as one message.
 */
final class MatchingCodec implements RigCodec
{
    @Override
    public int encodeOrder(final long correlationId, final WireOrder o, final MutableDirectBuffer out, final int offset)
    {
        header(out, offset, Wire.TYPE_ORDER, correlationId);
        final int q = offset + Wire.REQUEST_HEADER;
        out.putLong(q, o.id);
        out.putInt(q + 8, (int)o.instrument);
        out.putByte(q + 12, o.side);
        out.putByte(q + 13, o.timeInForce);
        out.putByte(q + 14, (byte)(o.market ? 1 : 0));
        out.putLong(q + 15, o.price);
        out.putLong(q + 23, o.quantity);
        return Wire.REQUEST_HEADER + WireOrder.LENGTH;
    }

    @Override
    public int encodeCancel(final long correlationId, final long orderId, final MutableDirectBuffer out, final int offset)
    {
        header(out, offset, Wire.TYPE_CANCEL, correlationId);
        out.putLong(offset + Wire.REQUEST_HEADER, orderId);
        return Wire.REQUEST_HEADER + 8;
    }

    @Override
    public int encodeBatch(
        final long correlationId, final DirectBuffer orders, final int ordersOffset, final int count, final MutableDirectBuffer out,
        final int offset)
    {
        header(out, offset, Wire.TYPE_BATCH, correlationId);
        out.putInt(offset + Wire.REQUEST_HEADER, count);
        out.putBytes(offset + Wire.REQUEST_HEADER + 4, orders, ordersOffset, count * WireOrder.LENGTH);
        return Wire.REQUEST_HEADER + 4 + count * WireOrder.LENGTH;
    }

    private static void header(final MutableDirectBuffer out, final int offset, final byte type, final long correlationId)
    {
        out.putByte(offset, type);
        out.putLong(offset + 1, correlationId);
    }

    @Override
    public long ingressCorrelationId(final DirectBuffer b, final int offset, final int length)
    {
        return b.getLong(offset + 1);
    }

    @Override
    public boolean decodeEgress(final DirectBuffer b, final int offset, final int length, final Reply reply)
    {
        if (length < Wire.RESPONSE_FIXED)
        {
            return false;
        }
        reply.correlationId = b.getLong(offset + 1) + (Main.TRAP.equals("wrong-correlation-id") ? 1L << 40 : 0);
        reply.status = b.getByte(offset + 9);
        reply.filled = b.getLong(offset + 10);
        reply.rested = b.getLong(offset + 18);
        final int tl = b.getShort(offset + 34) & 0xffff;
        reply.text = tl == 0 ? null : b.getStringWithoutLengthUtf8(offset + Wire.RESPONSE_FIXED, tl);
        return true;
    }
}
