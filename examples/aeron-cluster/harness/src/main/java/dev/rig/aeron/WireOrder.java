package dev.rig.aeron;

import org.agrona.DirectBuffer;

/** One order as docs/wire.md carries it (31 bytes, little-endian): what a {@link RigCodec} encodes. */
public final class WireOrder
{
    public static final int LENGTH = 31;
    public static final byte BUY = 0;
    public static final byte SELL = 1;
    public static final byte GTC = 0;
    public static final byte IOC = 1;

    public long id;
    /** Unsigned 32-bit instrument id, held in a long. */
    public long instrument;
    public byte side;
    public byte timeInForce;
    public boolean market;
    public long price;
    public long quantity;

    /** Reads the order at {@code b[offset..offset+LENGTH)} into this object; returns it. */
    public WireOrder read(final DirectBuffer b, final int offset)
    {
        id = b.getLong(offset);
        instrument = b.getInt(offset + 8) & 0xffffffffL;
        side = b.getByte(offset + 12);
        timeInForce = b.getByte(offset + 13);
        market = b.getByte(offset + 14) == 1;
        price = b.getLong(offset + 15);
        quantity = b.getLong(offset + 23);
        return this;
    }
}
