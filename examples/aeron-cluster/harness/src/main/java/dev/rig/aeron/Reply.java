package dev.rig.aeron;

/** What a {@link RigCodec} reads from one egress message: the answer to one rig request. */
public final class Reply
{
    public static final byte OK = 0;
    public static final byte REJECTED = 2;
    public static final byte ERROR = 3;

    public long correlationId;
    public byte status = OK;
    /** Quantity filled and left resting; 0 when the service does not say. */
    public long filled;
    public long rested;
    /** Why a request was rejected; null when it was not. */
    public String text;

    void reset()
    {
        correlationId = 0;
        status = OK;
        filled = 0;
        rested = 0;
        text = null;
    }
}
