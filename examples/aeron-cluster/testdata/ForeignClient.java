import io.aeron.CommonContext;
import io.aeron.archive.client.AeronArchive;
import io.aeron.cluster.client.AeronCluster;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.exceptions.TimeoutException;
import io.aeron.security.AuthenticationException;
import io.aeron.security.CredentialsSupplier;
import io.aeron.security.NullCredentialsSupplier;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.DatagramSocket;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.concurrent.TimeUnit;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * A client that is not part of the run (auth_test.go runs it as another local user, in Java's
 * source-file mode, with its own media driver and without the run's secret). It tries what an
 * intruder would on one node's Aeron endpoints and prints one line per request:
 *
 *   archive HOST:PORT list|replay|truncate: REFUSED|TIMEOUT|ANSWERED|ERROR: detail
 *   ingress send: ...
 *
 * Usage: ForeignClient ARCHIVE_HOST:PORT[,ARCHIVE_HOST:PORT...] INGRESS_ENDPOINTS RESPONSE_HOST
 * (INGRESS_ENDPOINTS as Aeron takes them: 0=host:port,1=host:port,...).
 *
 * With RIG_CLUSTER_SECRET in its environment it presents the credentials the run's own clients
 * do (derived as dev.rig.aeron.RunAuth derives them), over the same UDP endpoints a peer's
 * archive replicates through: the test's proof that a refusal is about credentials.
 */
public final class ForeignClient
{
    private static final long TIMEOUT_NS = TimeUnit.SECONDS.toNanos(3);
    private static final String SECRET = System.getenv("RIG_CLUSTER_SECRET");

    private static CredentialsSupplier credentials(final String endpoint)
    {
        if (SECRET == null || SECRET.isEmpty())
        {
            return new NullCredentialsSupplier();
        }
        try
        {
            final Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(SECRET.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
            final byte[] c = mac.doFinal(("rig-aeron " + endpoint).getBytes(StandardCharsets.US_ASCII));
            return new CredentialsSupplier()
            {
                public byte[] encodedCredentials()
                {
                    return c;
                }

                public byte[] onChallenge(final byte[] challenge)
                {
                    return new byte[0];
                }
            };
        }
        catch (final GeneralSecurityException e)
        {
            throw new IllegalStateException(e);
        }
    }

    public static void main(final String[] args)
    {
        final String[] archives = args[0].split(",");
        final String ingress = args[1];
        final String host = args[2];
        try (MediaDriver driver = MediaDriver.launchEmbedded(new MediaDriver.Context()
            .aeronDirectoryName(CommonContext.generateRandomDirName())
            .threadingMode(ThreadingMode.SHARED)
            .dirDeleteOnStart(true)
            .dirDeleteOnShutdown(true)))
        {
            for (final String archive : archives)
            {
                for (final String op : new String[] {"list", "replay", "truncate"})
                {
                    System.out.println("archive " + archive + " " + op + ": " + archive(driver.aeronDirectoryName(), archive, host, op));
                }
            }
            System.out.println("ingress send: " + ingress(driver.aeronDirectoryName(), ingress, host));
        }
    }

    private static String archive(final String dir, final String endpoint, final String host, final String op)
    {
        final AeronArchive.Context ctx = new AeronArchive.Context()
            .aeronDirectoryName(dir)
            .controlRequestChannel("aeron:udp?endpoint=" + endpoint)
            .controlResponseChannel("aeron:udp?endpoint=" + host + ":0")
            .credentialsSupplier(credentials("archive control"))
            .messageTimeoutNs(TIMEOUT_NS);
        final AeronArchive client;
        try
        {
            client = AeronArchive.connect(ctx);
        }
        catch (final RuntimeException e)
        {
            return refusal(e);
        }
        try (client)
        {
            switch (op)
            {
                case "list":
                    final int[] n = {0};
                    client.listRecordings(0, 100, (controlSessionId, correlationId, recordingId, startTimestamp, stopTimestamp,
                        startPosition, stopPosition, initialTermId, segmentFileLength, termBufferLength, mtuLength, sessionId,
                        streamId, strippedChannel, originalChannel, sourceIdentity) -> n[0]++);
                    return "ANSWERED: " + n[0] + " recording(s) listed";
                case "replay":
                    return "ANSWERED: replay session " +
                        client.startReplay(0, 0, AeronArchive.NULL_LENGTH, "aeron:udp?endpoint=" + host + ":" + freePort(host), 1001);
                default:
                    return "ANSWERED: truncated to " + client.truncateRecording(0, 0);
            }
        }
        catch (final RuntimeException e)
        {
            // The archive heard and answered this session (an error is an answer: it was not refused).
            return "ANSWERED: error " + e.getMessage();
        }
    }

    private static String ingress(final String dir, final String endpoints, final String host)
    {
        final AeronCluster client;
        try
        {
            client = AeronCluster.connect(new AeronCluster.Context()
                .aeronDirectoryName(dir)
                .ingressChannel("aeron:udp")
                .ingressEndpoints(endpoints)
                .egressChannel("aeron:udp?endpoint=" + host + ":0")
                .credentialsSupplier(credentials("cluster ingress"))
                .messageTimeoutNs(TIMEOUT_NS));
        }
        catch (final RuntimeException e)
        {
            return refusal(e);
        }
        try (client)
        {
            // A message of an unknown type: the service answers it unsupported, and nothing changes.
            final long pos = client.offer(new UnsafeBuffer(new byte[9]), 0, 9);
            return "ANSWERED: cluster session " + client.clusterSessionId() + " opened, offer returned " + pos;
        }
    }

    private static int freePort(final String host)
    {
        try (DatagramSocket s = new DatagramSocket(new InetSocketAddress(host, 0)))
        {
            return s.getLocalPort();
        }
        catch (final IOException e)
        {
            throw new UncheckedIOException(e);
        }
    }

    private static String refusal(final RuntimeException e)
    {
        if (e instanceof AuthenticationException || String.valueOf(e.getMessage()).contains("authentication rejected"))
        {
            return "REFUSED: " + e.getMessage();
        }
        if (e instanceof TimeoutException)
        {
            return "TIMEOUT: " + e.getMessage();
        }
        return "ERROR: " + e;
    }
}
