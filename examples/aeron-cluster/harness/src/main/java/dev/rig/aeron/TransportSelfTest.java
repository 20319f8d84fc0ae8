package dev.rig.aeron;

import io.aeron.AeronCounters;
import io.aeron.driver.status.SystemCounterDescriptor;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersManager;

/**
 * HarnessSelfTest's checks of the burst path that need no cluster: GET /transport's counters read
 * from a counters file, and a burst's figures from its senders' send and reply times.
 */
final class TransportSelfTest
{
    private static int failed;

    private TransportSelfTest()
    {
    }

    private static void check(final String name, final boolean ok, final String seen)
    {
        System.out.println((ok ? "pass " : "FAIL ") + name + ": " + seen);
        if (!ok)
        {
            failed++;
        }
    }

    /** Runs every check; the number that failed. */
    static int run()
    {
        final CountersManager cm = new CountersManager(new UnsafeBuffer(ByteBuffer.allocateDirect(64 * 1024)),
            new UnsafeBuffer(ByteBuffer.allocateDirect(8 * 1024)));
        final UnsafeBuffer key = new UnsafeBuffer(new byte[4]);
        final UnsafeBuffer label = new UnsafeBuffer("x".getBytes());
        key.putInt(0, SystemCounterDescriptor.NAK_MESSAGES_SENT.id());
        cm.setCounterValue(cm.allocate(AeronCounters.DRIVER_SYSTEM_COUNTER_TYPE_ID, key, 0, 4, label, 0, 1), 7);
        key.putInt(0, SystemCounterDescriptor.LOSS_GAP_FILLS.id());
        cm.setCounterValue(cm.allocate(AeronCounters.DRIVER_SYSTEM_COUNTER_TYPE_ID, key, 0, 4, label, 0, 1), 2);
        cm.setCounterValue(cm.allocate(AeronCounters.DRIVER_SENDER_BPE_TYPE_ID, key, 0, 4, label, 0, 1), 3);
        cm.setCounterValue(cm.allocate(AeronCounters.DRIVER_SENDER_BPE_TYPE_ID, key, 0, 4, label, 0, 1), 4);
        final Map<String, Long> c = TransportCounters.read(cm);
        check("transport counters: system counters by name, back-pressure events summed",
            c.get("nak_messages_sent") == 7 && c.get("loss_gap_fills") == 2 && c.get(TransportCounters.BACK_PRESSURE) == 7, c.toString());

        // Two senders of 100 messages 10 us apart; replies 2 ms after each send, but sender 1's
        // last two never come.
        final BurstClient.Seen a = new BurstClient.Seen(100);
        final BurstClient.Seen b = new BurstClient.Seen(100);
        for (int i = 0; i < 100; i++)
        {
            a.sent[i] = 1_000_000L + i * 10_000L;
            a.answered[i] = a.sent[i] + 2_000_000L;
            b.sent[i] = 1_000_000L + i * 10_000L;
            b.answered[i] = i < 98 ? b.sent[i] + 2_000_000L + (i == 97 ? 5_000_000L : 0) : 0;
        }
        final BurstClient.Figures f = BurstClient.Figures.of(List.of(a, b));
        check("a burst's figures: sent, answered, p50, p99, max, peaks, drain",
            f.sent == 200 && f.answered == 198 && f.p50Ns == 2_000_000L && f.p99Ns == 2_000_000L && f.maxNs == 7_000_000L &&
                f.sendPeakPerMs == 200 && f.answeredPeakPerMs == 197 && f.drainNs == 7_970_000L,
            "sent " + f.sent + " answered " + f.answered + " p50 " + f.p50Ns + " p99 " + f.p99Ns + " max " + f.maxNs + " peaks " +
                f.sendPeakPerMs + "/" + f.answeredPeakPerMs + " drain " + f.drainNs);

        // The kernel grants twice what a socket asks for under net.core.rmem_max, and getsockopt
        // says so; the JDK's read-back alone would say the ask.
        final long rmemMax = Node.sysctl("/proc/sys/net/core/rmem_max", -1);
        final int asked = (int)Math.min(rmemMax, 64 * 1024);
        final long granted = TransportCounters.granted(asked);
        check("so_rcvbuf_granted is the kernel's grant, twice the ask under rmem_max",
            rmemMax <= 0 || granted == 2L * asked, "asked " + asked + " under rmem_max " + rmemMax + ": granted " + granted);
        return failed;
    }
}
