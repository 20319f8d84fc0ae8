package dev.rig.aeron;

import io.aeron.Aeron;
import io.aeron.AeronCounters;
import io.aeron.ExclusivePublication;
import io.aeron.Subscription;
import io.aeron.cluster.codecs.MessageHeaderEncoder;
import io.aeron.cluster.codecs.SessionMessageHeaderEncoder;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.driver.status.SystemCounterDescriptor;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersManager;

/**
 * HarnessSelfTest's checks of the burst path that need no cluster: GET /transport's counters read
 * from a counters file, a burst's figures from its senders' send and reply times, and the leader's
 * burst probe: what it makes of stamped ingress messages, and that it reads a real ingress stream
 * beside a subscriber with the consensus module's parameters.
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
        probeFigures();
        probeOnIngress();
        return failed;
    }

    /** An ingress message as a cluster client sends it: SBE header, session header, payload of size bytes with a burst trailer. */
    static int ingressMessage(final UnsafeBuffer buf, final int size, final long burst, final int number, final long startNs,
        final long offeredNs)
    {
        final int len = new SessionMessageHeaderEncoder().wrapAndApplyHeader(buf, 0, new MessageHeaderEncoder())
            .leadershipTermId(1).clusterSessionId(2).timestamp(0).encodedLength() + MessageHeaderEncoder.ENCODED_LENGTH + size;
        BurstProbe.stamp(buf, len, burst, 0, number, startNs, offeredNs);
        return len;
    }

    /**
     * 100 stamped messages of burst 7 offered 10 us apart from its start, each arriving 1 ms after
     * its offer; an unstamped one and a keep-alive are not counted.
     */
    private static void probeFigures()
    {
        final BurstProbe p = new BurstProbe(null);
        final UnsafeBuffer buf = new UnsafeBuffer(new byte[512]);
        final long start = 1_000_000_000L;
        for (int i = 0; i < 100; i++)
        {
            final long offered = start + i * 10_000L;
            p.onMessage(buf, 0, ingressMessage(buf, 170, 7, i, start, offered), offered + 1_000_000L);
        }
        final int plain = ingressMessage(buf, 170, 7, 100, start, start);
        buf.putLong(plain - BurstProbe.TRAILER, 0); // no trailer: some other client's message
        p.onMessage(buf, 0, plain, start);
        final int other = ingressMessage(buf, 170, 7, 101, start, start);
        new MessageHeaderEncoder().wrap(buf, 0).templateId(3); // not a session message
        p.onMessage(buf, 0, other, start);
        final String j = p.json();
        check("burst probe: per burst received, latency from first offer and from the burst's start, peak per 1 ms at the leader",
            j.equals("[{\"burst\":7,\"received\":100,\"first_unix_ns\":1001000000,\"last_unix_ns\":1001990000,\"peak_per_ms\":100," +
                "\"p50_ns\":1000000,\"p99_ns\":1000000,\"max_ns\":1000000,\"from_start_p50_ns\":1490000,\"from_start_p99_ns\":1980000," +
                "\"from_start_max_ns\":1990000}]"), j);
    }

    /**
     * A media driver on loopback; a subscriber with the consensus module's ingress parameters and the
     * probe share the endpoint, and the probe counts every stamped message a publication sends.
     */
    private static void probeOnIngress()
    {
        final String dir = System.getProperty("java.io.tmpdir") + "/rig-probe-test-" + ProcessHandle.current().pid();
        int port;
        try (java.net.DatagramSocket s = new java.net.DatagramSocket(0, java.net.InetAddress.getLoopbackAddress()))
        {
            port = s.getLocalPort();
        }
        catch (final java.io.IOException e)
        {
            check("burst probe reads an ingress stream beside the consensus module's subscriber", false, e.toString());
            return;
        }
        final String endpoint = "127.0.0.1:" + port;
        final int n = 2_000;
        try (MediaDriver driver = MediaDriver.launchEmbedded(new MediaDriver.Context().aeronDirectoryName(dir)
                .threadingMode(ThreadingMode.SHARED).dirDeleteOnStart(true).dirDeleteOnShutdown(true));
            Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(driver.aeronDirectoryName()));
            Subscription cm = aeron.addSubscription("aeron:udp?endpoint=" + endpoint + "|rejoin=false|reliable=true", 101);
            BurstProbe probe = BurstProbe.start(aeron, endpoint, 101);
            ExclusivePublication pub = aeron.addExclusivePublication("aeron:udp?endpoint=" + endpoint, 101))
        {
            final long deadline = System.nanoTime() + 20_000_000_000L;
            while (!pub.isConnected() && System.nanoTime() < deadline)
            {
                Thread.onSpinWait();
            }
            final UnsafeBuffer buf = new UnsafeBuffer(new byte[512]);
            final long offset = BurstProbe.epochNanos() - System.nanoTime();
            final int[] cmSeen = {0};
            final long start = System.nanoTime() + offset;
            for (int i = 0; i < n && System.nanoTime() < deadline; i++)
            {
                final int len = ingressMessage(buf, 170, 3, i, start, System.nanoTime() + offset);
                while (pub.offer(buf, 0, len) < 0 && System.nanoTime() < deadline)
                {
                    cm.poll((b, o, l, h) -> cmSeen[0]++, 64);
                }
            }
            String j = probe.json();
            while (!j.contains("\"received\":" + n + ",") && System.nanoTime() < deadline)
            {
                cm.poll((b, o, l, h) -> cmSeen[0]++, 64);
                j = probe.json();
            }
            while (cmSeen[0] < n && System.nanoTime() < deadline)
            {
                cm.poll((b, o, l, h) -> cmSeen[0]++, 64);
            }
            final long max = Long.parseLong(j.replaceAll(".*\"max_ns\":(-?[0-9]+).*", "$1"));
            check("burst probe reads an ingress stream beside the consensus module's subscriber: every message, to both",
                j.contains("\"burst\":3,\"received\":" + n + ",") && cmSeen[0] == n && max >= 0 && max < 20_000_000_000L,
                "consensus-module-like subscriber " + cmSeen[0] + " of " + n + "; probe " + j);
        }
        catch (final RuntimeException e)
        {
            check("burst probe reads an ingress stream beside the consensus module's subscriber: every message, to both", false, e.toString());
        }
    }
}
