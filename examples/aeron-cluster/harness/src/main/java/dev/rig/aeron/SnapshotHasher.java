package dev.rig.aeron;

import io.aeron.Aeron;
import io.aeron.Image;
import io.aeron.Subscription;
import io.aeron.cluster.codecs.MessageHeaderDecoder;
import io.aeron.cluster.codecs.SnapshotMarkerDecoder;
import io.aeron.cluster.service.ClusteredServiceContainer;
import io.aeron.logbuffer.FragmentHandler;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.Map;
import org.agrona.concurrent.BackoffIdleStrategy;

/**
 * Hashes every snapshot the service container writes, for a service with no state hash of its own:
 * a second subscriber on the container's snapshot stream (the archive is the first), on its own
 * thread, reads each snapshot image from its first byte to its end and hashes its payload bytes
 * (SHA-256, the first 8 bytes). The image holds the container's SnapshotMarker records, its client
 * sessions and the service's own records, all taken at one log position from one log, so nodes
 * whose state agrees write the same bytes. The position is read from the first SnapshotMarker
 * with Aeron's own decoder.
 *
 * The stream is an IPC publication: it cannot run ahead of its slowest subscriber by more than its
 * window, so this thread never lets the service's offers fail, it can only slow them while it
 * lags. For a service with a state hash of its own it only counts the bytes (digest false): a
 * SHA-256 of a 1M-order book is ~17 ms of a CPU per node per snapshot that nothing reads, taken
 * while the node's Archive writes the same snapshot.
 */
final class SnapshotHasher implements Runnable
{
    private final Subscription subscription;
    private final NodeState state;
    private final boolean digest;
    private final Map<Integer, Digest> digests = new HashMap<>();
    private volatile boolean running = true;

    /** One image being read. */
    private static final class Digest
    {
        final MessageDigest sha;
        byte[] tmp = new byte[4096];
        long bytes;
        long chunks;
        long position = -1;
        boolean done;

        Digest()
        {
            try
            {
                sha = MessageDigest.getInstance("SHA-256");
            }
            catch (final NoSuchAlgorithmException e)
            {
                throw new IllegalStateException(e);
            }
        }
    }

    SnapshotHasher(final Aeron aeron, final String channel, final int streamId, final NodeState state, final boolean digest)
    {
        this.subscription = aeron.addSubscription(channel, streamId);
        this.state = state;
        this.digest = digest;
    }

    void start()
    {
        final Thread t = new Thread(this, "rig-snapshot-hash");
        t.setDaemon(true);
        t.start();
    }

    void close()
    {
        running = false;
    }

    @Override
    public void run()
    {
        final MessageHeaderDecoder header = new MessageHeaderDecoder();
        final SnapshotMarkerDecoder marker = new SnapshotMarkerDecoder();
        final BackoffIdleStrategy idle = new BackoffIdleStrategy(10, 20, 1_000, 1_000_000);
        while (running && !subscription.isClosed())
        {
            int work = 0;
            try
            {
                for (final Image image : subscription.images())
                {
                    final Digest d = digests.computeIfAbsent(image.sessionId(), k -> new Digest());
                    if (d.done)
                    {
                        continue;
                    }
                    final FragmentHandler h = (b, off, len, hdr) ->
                    {
                        if (d.chunks == 0 && len >= MessageHeaderDecoder.ENCODED_LENGTH)
                        {
                            header.wrap(b, off);
                            if (header.templateId() == SnapshotMarkerDecoder.TEMPLATE_ID)
                            {
                                marker.wrap(b, off + MessageHeaderDecoder.ENCODED_LENGTH, header.blockLength(), header.version());
                                // The consensus module's own snapshot has another type id: not the service's.
                                if (marker.typeId() == ClusteredServiceContainer.Configuration.SNAPSHOT_TYPE_ID)
                                {
                                    d.position = marker.logPosition();
                                }
                            }
                        }
                        if (digest)
                        {
                            if (d.tmp.length < len)
                            {
                                d.tmp = new byte[len];
                            }
                            b.getBytes(off, d.tmp, 0, len);
                            d.sha.update(d.tmp, 0, len);
                        }
                        d.bytes += len;
                        d.chunks++;
                    };
                    work += image.poll(h, 64);
                    if (image.isEndOfStream())
                    {
                        d.done = true;
                        long v = 0;
                        if (digest)
                        {
                            final byte[] sum = d.sha.digest();
                            for (int i = 0; i < 8; i++)
                            {
                                v = v << 8 | (sum[i] & 0xffL);
                            }
                        }
                        if (d.position >= 0)
                        {
                            state.snapshotHashed(new NodeState.SnapshotHash(d.position, v, d.bytes, d.chunks));
                            Log.info(String.format("snapshot at log position %d: %d bytes in %d fragments%s", d.position,
                                d.bytes, d.chunks, digest ? String.format(", hash %016x", v) : ""));
                        }
                    }
                }
                digests.keySet().removeIf(id -> subscription.imageBySessionId(id) == null);
            }
            catch (final RuntimeException e)
            {
                if (running)
                {
                    Log.error("snapshot hash", e);
                }
            }
            idle.idle(work);
        }
    }
}
