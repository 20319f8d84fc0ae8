package dev.rig.aeron;

import io.aeron.Publication;
import io.aeron.cluster.client.AeronCluster;
import io.aeron.cluster.client.EgressListener;
import io.aeron.logbuffer.Header;
import io.aeron.security.CredentialsSupplier;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.agrona.DirectBuffer;
import org.agrona.ExpandableArrayBuffer;
import org.agrona.collections.Long2LongHashMap;
import org.agrona.collections.Long2ObjectHashMap;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * docs/wire.md on the node's client address, in front of the cluster's ingress, through the
 * user's {@link RigCodec}.
 *
 * Every connection gets a reader thread. Pings are answered at once; on a node that does not
 * lead, every command is answered not-leader with the leader's client address (empty while no
 * leader is known), as the reference engine does, so the load generator moves to the leader's
 * node. Every node's gateway keeps one cluster session ({@link AeronCluster}, on the embedded media
 * driver) open from the first known leader on, followers' too, and the session follows each new
 * leader through Aeron's new-leader event: the node that wins an election sends on the session it
 * already has, with no connect in the client's gap. On the leader's node commands go to the one
 * thread that owns the session: the codec turns each request into the service's own ingress
 * message with the gateway's correlation id (clients' ids may collide) in a field of its choosing,
 * and reads the id back from the service's egress answer. The ack's index is the log position the
 * decorator saw the message at. A batch the codec splits is sent order by order and answered once
 * every order is.
 */
final class Gateway
{
    private static final long ANSWER_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);
    private static final long KEEPALIVE_NS = TimeUnit.SECONDS.toNanos(1);

    private final Node.Config cfg;
    private final NodeState state;
    private final String aeronDir;
    private final ConcurrentLinkedQueue<Request> queue = new ConcurrentLinkedQueue<>();
    private final RigCodec codec;
    private final String service;
    private final CredentialsSupplier credentials; // the run's, for the ingress (RunAuth)
    private final Long2ObjectHashMap<Pending> pending = new Long2ObjectHashMap<>();
    private final Set<String> unsupported = ConcurrentHashMap.newKeySet();
    private final WireOrder order = new WireOrder();
    private final Reply reply = new Reply();
    private final ExpandableArrayBuffer out = new ExpandableArrayBuffer(Wire.RESPONSE_FIXED + 1024);
    private final ArrayList<Conn> unflushed = new ArrayList<>();
    private long nextCorr = 1;
    /**
     * The rig order ids sent as correlation ids: per high 32 bits (a load generator stream's base),
     * the highest low 32 bits sent, so a reply is told sent or never sent in bounded memory.
     */
    private final Long2LongHashMap sentOrderIds = new Long2LongHashMap(-1);
    private final AtomicLong commands = new AtomicLong();
    private volatile boolean connected;
    /** The member the session sends to (AeronCluster's leader: set at connect and by each new-leader event); -1 without one. */
    private volatile int sessionLeader = -1;
    /** When the session heard of a new leader (0: it has sent to it since), and the offers refused since. */
    private long newLeaderNs;
    private long refused;
    private volatile boolean running = true;
    private ServerSocket server;
    /** The thread that owns the cluster session: woken by each queued command rather than left to its idle strategy's park. */
    private volatile Thread clientThread;

    /** One command waiting for its answer. */
    private record Request(Conn conn, byte[] body, int len, long sentNs)
    {
        int count()
        {
            return (body[9] & 0xff) | (body[10] & 0xff) << 8 | (body[11] & 0xff) << 16 | (body[12] & 0xff) << 24;
        }
    }

    /** A client connection; writes are serialised on it. */
    private static final class Conn
    {
        final Socket socket;
        final OutputStream out;
        final byte[] lenBuf = new byte[4];

        Conn(final Socket socket) throws IOException
        {
            this.socket = socket;
            this.out = new BufferedOutputStream(socket.getOutputStream(), 64 * 1024);
        }

        /** Client thread only: this connection holds answers written but not flushed. */
        boolean unflushed;

        synchronized void write(final byte[] body, final int off, final int len)
        {
            append(body, off, len);
            flush();
        }

        /** Buffers one answer; {@link #flush} sends what is buffered. */
        synchronized void append(final byte[] body, final int off, final int len)
        {
            try
            {
                lenBuf[0] = (byte)len;
                lenBuf[1] = (byte)(len >>> 8);
                lenBuf[2] = (byte)(len >>> 16);
                lenBuf[3] = (byte)(len >>> 24);
                out.write(lenBuf);
                out.write(body, off, len);
            }
            catch (final IOException e)
            {
                close();
            }
        }

        synchronized void flush()
        {
            try
            {
                out.flush();
            }
            catch (final IOException e)
            {
                close();
            }
        }

        void close()
        {
            try
            {
                socket.close();
            }
            catch (final IOException ignored)
            {
                // closing anyway
            }
        }
    }

    Gateway(final Node.Config cfg, final NodeState state, final String aeronDir, final RigCodec codec, final String service,
        final CredentialsSupplier credentials)
    {
        this.cfg = cfg;
        this.state = state;
        this.aeronDir = aeronDir;
        this.codec = codec;
        this.service = service;
        this.credentials = credentials;
        // A codec that says so up front is reported before any request needs it.
        final ExpandableArrayBuffer probe = new ExpandableArrayBuffer(64);
        if (codec.encodeCancel(0, 0, probe, 0) == RigCodec.UNSUPPORTED)
        {
            unsupported.add("cancel");
        }
    }

    /** The request kinds the codec has refused (cancel, order, batch): /status unsupported. */
    List<String> unsupported()
    {
        return new ArrayList<>(new TreeSet<>(unsupported));
    }

    long commands()
    {
        return commands.get();
    }

    boolean connected()
    {
        return connected;
    }

    void start() throws IOException
    {
        server = new ServerSocket();
        server.setReuseAddress(true);
        server.bind(new InetSocketAddress(cfg.clientHost(), cfg.clientPort()), 256);
        final Thread accept = new Thread(this::acceptLoop, "gateway-accept");
        accept.setDaemon(true);
        accept.start();
        final Thread client = new Thread(this::clientLoop, "gateway-cluster-client");
        client.setDaemon(true);
        clientThread = client;
        client.start();
        Log.info("gateway on " + cfg.clientAddr() + " (docs/wire.md) in front of ingress " + cfg.ingressEndpoints());
    }

    void close()
    {
        running = false;
        try
        {
            server.close();
        }
        catch (final IOException ignored)
        {
            // shutting down
        }
    }

    private void acceptLoop()
    {
        while (running)
        {
            try
            {
                final Socket s = server.accept();
                s.setTcpNoDelay(true);
                final Conn c = new Conn(s);
                final Thread t = new Thread(() -> readLoop(c), "gateway-conn-" + s.getRemoteSocketAddress());
                t.setDaemon(true);
                t.start();
            }
            catch (final IOException e)
            {
                if (running)
                {
                    Log.warn("gateway accept: " + e);
                }
            }
        }
    }

    private void readLoop(final Conn c)
    {
        final byte[] resp = new byte[Wire.RESPONSE_FIXED + 1024];
        final UnsafeBuffer rb = new UnsafeBuffer(resp);
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(c.socket.getInputStream(), 64 * 1024)))
        {
            while (running)
            {
                final long len = Integer.toUnsignedLong(Integer.reverseBytes(in.readInt()));
                if (len > Wire.MAX_FRAME)
                {
                    Log.warn("gateway: frame of " + len + " bytes from " + c.socket.getRemoteSocketAddress() +
                        ", more than " + Wire.MAX_FRAME + ": closing (docs/wire.md, Framing)");
                    break;
                }
                final byte[] body = new byte[(int)len];
                in.readFully(body);
                final String bad = Wire.malformed(body, body.length);
                if (bad != null)
                {
                    c.write(resp, 0, Wire.response(rb, 0, (byte)0, 0, Wire.STATUS_REJECTED, 0, 0, 0, bad));
                    break;
                }
                final byte type = body[0];
                final long corr = leLong(body, 1);
                if (type == Wire.TYPE_PING)
                {
                    c.write(resp, 0, Wire.response(rb, 0, type, corr, Wire.STATUS_OK, 0, 0, 0, null));
                    continue;
                }
                final String redirect = redirect();
                if (redirect != null)
                {
                    c.write(resp, 0, Wire.response(rb, 0, type, corr, Wire.STATUS_NOT_LEADER, 0, 0, 0, redirect));
                    continue;
                }
                queue.add(new Request(c, body, body.length, System.nanoTime()));
                LockSupport.unpark(clientThread);
            }
        }
        catch (final EOFException ignored)
        {
            // client closed
        }
        catch (final IOException e)
        {
            if (running)
            {
                Log.warn("gateway connection " + c.socket.getRemoteSocketAddress() + ": " + e);
            }
        }
        finally
        {
            c.close();
        }
    }

    /**
     * null when this node leads and its cluster session sends to it; else the not-leader text. A
     * node that has just won an election waits for the session to hear so (the new-leader
     * event): until then the session's ingress still points at the old leader, and a command
     * sent there would be lost.
     */
    private String redirect()
    {
        if (state.role == io.aeron.cluster.service.Cluster.Role.LEADER && connected && sessionLeader == cfg.memberId())
        {
            return null;
        }
        final int leader = state.leaderMemberId;
        if (state.role != io.aeron.cluster.service.Cluster.Role.LEADER && leader >= 0 && leader != cfg.memberId() &&
            leader < cfg.peers().size())
        {
            return cfg.peers().get(leader).clientAddr();
        }
        return ""; // election, or this node leads but its ingress is not up yet: retry shortly
    }

    private static long leLong(final byte[] b, final int off)
    {
        long v = 0;
        for (int i = 7; i >= 0; i--)
        {
            v = v << 8 | (b[off + i] & 0xffL);
        }
        return v;
    }

    private void answer(final Request r, final byte status, final String text)
    {
        final byte[] resp = new byte[Wire.RESPONSE_FIXED + 256];
        final int n = Wire.response(new UnsafeBuffer(resp), 0, r.body[0], leLong(r.body, 1), status, 0, 0, 0, text);
        r.conn.write(resp, 0, n);
    }

    /** A command sent to the cluster, waiting for its answer(s); a split batch waits for one per order. */
    private static final class Pending
    {
        final Request request;
        int remaining;
        int rejected;
        long filled;
        long rested;
        long index;
        String text;

        Pending(final Request request, final int remaining)
        {
            this.request = request;
            this.remaining = remaining;
        }
    }

    /** Offers msg[0, len) to ingress, polling egress while back-pressured for up to 1 s; the result of the last offer. */
    private static long offer(final AeronCluster client, final ExpandableArrayBuffer msg, final int len)
    {
        long res;
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
        while ((res = client.offer(msg, 0, len)) < 0 &&
            (res == Publication.BACK_PRESSURED || res == Publication.ADMIN_ACTION) && System.nanoTime() < deadline)
        {
            client.pollEgress();
            Thread.onSpinWait();
        }
        return res;
    }

    /** Sends one client command through the codec; false when the client must reconnect. */
    private boolean send(final AeronCluster client, final Request r, final ExpandableArrayBuffer msg, final UnsafeBuffer body)
    {
        body.wrap(r.body, 0, r.len);
        final byte type = r.body[0];
        final long id = correlationId(type, body);
        int len;
        switch (type)
        {
            case Wire.TYPE_ORDER:
                len = codec.encodeOrder(id, order.read(body, Wire.REQUEST_HEADER), msg, 0);
                break;
            case Wire.TYPE_CANCEL:
                len = codec.encodeCancel(id, body.getLong(Wire.REQUEST_HEADER), msg, 0);
                break;
            default: // batch; the reader let nothing else through
                len = codec.encodeBatch(id, body, Wire.REQUEST_HEADER + 4, body.getInt(Wire.REQUEST_HEADER), msg, 0);
        }
        if (len == RigCodec.UNSUPPORTED || (len == RigCodec.SPLIT && type != Wire.TYPE_BATCH))
        {
            unsupported.add(type == Wire.TYPE_CANCEL ? "cancel" : type == Wire.TYPE_ORDER ? "order" : "batch");
            answer(r, Wire.STATUS_REJECTED, (type == Wire.TYPE_CANCEL ? "cancel" : "this request") + " is not supported by " + service);
            return true;
        }
        if (len == RigCodec.SPLIT)
        {
            final int count = body.getInt(Wire.REQUEST_HEADER);
            final Pending p = new Pending(r, count);
            for (int i = 0; i < count; i++)
            {
                final long sub = i == 0 ? id : nextCorr++;
                final int n = codec.encodeOrder(sub, order.read(body, Wire.REQUEST_HEADER + 4 + i * WireOrder.LENGTH), msg, 0);
                pending.put(sub, p);
                final long res = n < 0 ? Publication.CLOSED : offer(client, msg, n);
                if (res < 0)
                {
                    pending.remove(sub);
                    // Orders before this one are in the log: the batch is answered with what is known.
                    p.remaining -= count - i;
                    p.rejected += count - i;
                    p.text = (count - i) + " of " + count + " orders not sent: " + (n < 0 ? "the codec refused one" : Publication.errorString(res));
                    if (p.remaining == 0)
                    {
                        answer(r, i == 0 ? Wire.STATUS_NOT_LEADER : Wire.STATUS_ERROR, i == 0 ? "" : p.text);
                    }
                    return n < 0 || follows(res);
                }
            }
            accepted();
            return true;
        }
        pending.put(id, new Pending(r, 1));
        final long res = offer(client, msg, len);
        if (res < 0)
        {
            pending.remove(id);
            // Nothing was appended: the client may send it again elsewhere.
            answer(r, Wire.STATUS_NOT_LEADER, "");
            return follows(res);
        }
        accepted();
        return true;
    }

    /**
     * A single order goes with its rig order id as the correlation id: unique in the run (the load
     * generator's streams, docs/wire.md), so each node's applied record names the ledger's orders
     * (AppliedRecord). Anything else, or an id that cannot be one (low 32 bits only, where this
     * gateway's own numbers are) or is already pending (a resend), gets the gateway's next number.
     */
    private long correlationId(final byte type, final UnsafeBuffer body)
    {
        if (type == Wire.TYPE_ORDER)
        {
            final long orderId = body.getLong(Wire.REQUEST_HEADER);
            if (orderId >>> 32 != 0 && !pending.containsKey(orderId))
            {
                final long base = orderId >>> 32;
                final long low = orderId & 0xffffffffL;
                if (sentOrderIds.get(base) < low)
                {
                    sentOrderIds.put(base, low);
                }
                return orderId;
            }
        }
        return nextCorr++;
    }

    /** Whether this gateway ever sent a message with correlation id {@code id}. */
    private boolean sent(final long id)
    {
        return id >>> 32 == 0 ? id >= 1 && id < nextCorr : (id & 0xffffffffL) <= sentOrderIds.get(id >>> 32);
    }

    /**
     * Whether the session lives on after a failed offer: NOT_CONNECTED or CLOSED is the session
     * between leaders (AeronCluster waits for the new leader's event, up to its new-leader
     * timeout); only a log at its maximum position ends it.
     */
    private boolean follows(final long res)
    {
        if (res == Publication.MAX_POSITION_EXCEEDED)
        {
            Log.warn("gateway: ingress " + Publication.errorString(res) + ": reconnecting");
            return false;
        }
        refused++;
        return true;
    }

    /** An offer went through: after a leader change, says how long the session took to follow. */
    private void accepted()
    {
        if (newLeaderNs != 0)
        {
            Log.info("gateway: cluster session sends to the new leader " + (System.nanoTime() - newLeaderNs) / 1_000_000 +
                " ms after its new-leader event" + (refused == 0 ? "" : " (" + refused + " offers refused before its ingress connected)"));
            newLeaderNs = 0;
        }
        refused = 0;
    }

    /** One egress message: the codec says which request it answers; a batch is answered with its last order. */
    void onEgress(final DirectBuffer b, final int off, final int len)
    {
        reply.reset();
        final boolean harness = Traps.readError(b, off, len, reply);
        if (!harness && !codec.decodeEgress(b, off, len, reply))
        {
            return;
        }
        final long id = reply.correlationId;
        final Long pos = state.positions.remove(id);
        final Pending p = pending.remove(id);
        if (p == null)
        {
            // An id this gateway never sent is the codec's misreading; one it sent was answered,
            // timed out or failed already.
            if (!harness && !sent(id))
            {
                state.traps.unmatched(id);
            }
            return;
        }
        p.remaining--;
        p.filled += reply.filled;
        p.rested += reply.rested;
        p.index = Math.max(p.index, pos == null ? 0 : pos);
        if (reply.status != Reply.OK)
        {
            p.rejected++;
            if (p.text == null)
            {
                p.text = reply.text;
            }
        }
        if (p.remaining > 0)
        {
            return;
        }
        final Request r = p.request;
        byte status = reply.status;
        String text = reply.text;
        if (r.body[0] == Wire.TYPE_BATCH && p.rejected > 0)
        {
            status = Wire.STATUS_REJECTED;
            text = p.rejected + " of " + r.count() + " orders rejected" + (p.text == null ? "" : ": " + p.text);
        }
        else if (r.body[0] == Wire.TYPE_BATCH)
        {
            status = Wire.STATUS_OK;
        }
        final int n = Wire.response(out, 0, r.body[0], leLong(r.body, 1), status, p.filled, p.rested, p.index, text);
        // The answers one poll reads go out in one write per connection (flushAnswers).
        r.conn.append(out.byteArray(), 0, n);
        if (!r.conn.unflushed)
        {
            r.conn.unflushed = true;
            unflushed.add(r.conn);
        }
        commands.incrementAndGet();
    }

    private void clientLoop()
    {
        final ExpandableArrayBuffer msg = new ExpandableArrayBuffer(64 * 1024);
        final UnsafeBuffer body = new UnsafeBuffer(new byte[0]);
        final EgressListener listener = new EgressListener()
        {
            @Override
            public void onMessage(final long sessionId, final long timestamp, final DirectBuffer b, final int off, final int len,
                final Header header)
            {
                onEgress(b, off, len);
            }

            @Override
            public void onNewLeader(final long sessionId, final long termId, final int leaderMemberId, final String ingressEndpoints)
            {
                newLeaderNs = System.nanoTime();
                sessionLeader = leaderMemberId;
                // What was sent to the old leader is answered by nobody now (a new leader does not
                // replay egress): the clients resend it at once rather than after the answer timeout.
                failPending("the leader changed before an answer");
                Log.info("gateway: cluster session " + sessionId + " follows the new leader member " + leaderMemberId + " in term " + termId);
            }
        };
        AeronCluster client = null;
        long lastKeepAlive = 0;
        long nextConnect = 0;
        while (running)
        {
            final long now = System.nanoTime();
            if (client == null || client.isClosed())
            {
                connected = false;
                sessionLeader = -1;
                failPending("the gateway's cluster session closed before an answer");
                client = null;
                // Opened once a leader is known, on every node: a follower's session is the one it
                // sends on when it wins an election.
                if (state.serviceStarted && state.leaderMemberId >= 0 && now >= nextConnect)
                {
                    try
                    {
                        client = AeronCluster.connect(new AeronCluster.Context()
                            .aeronDirectoryName(aeronDir)
                            .ingressChannel("aeron:udp?term-length=16m")
                            .ingressEndpoints(cfg.ingressEndpoints())
                            .egressChannel("aeron:udp?endpoint=" + cfg.clientHost() + ":0")
                            .egressListener(listener)
                            .credentialsSupplier(credentials));
                        connected = true;
                        lastKeepAlive = now;
                        sessionLeader = client.leaderMemberId();
                        newLeaderNs = 0;
                        Log.info("gateway: cluster session " + client.clusterSessionId() + " open, leader member " + client.leaderMemberId());
                    }
                    catch (final RuntimeException e)
                    {
                        Log.warn("gateway: connect to the cluster: " + e);
                        nextConnect = now + TimeUnit.MILLISECONDS.toNanos(200);
                    }
                }
                drainUnsent("");
                sleep();
                continue;
            }
            int work = client.pollEgress();
            Request r;
            while ((r = queue.poll()) != null)
            {
                work++;
                if (!send(client, r, msg, body))
                {
                    client.close();
                    break;
                }
            }
            flushAnswers();
            if (now - lastKeepAlive > KEEPALIVE_NS && !client.isClosed())
            {
                client.sendKeepAlive();
                lastKeepAlive = now;
                expire(now);
            }
            if (work == 0)
            {
                sleep();
            }
            else
            {
                idle.reset();
            }
        }
        if (client != null)
        {
            client.close();
        }
    }

    private void flushAnswers()
    {
        for (int i = 0; i < unflushed.size(); i++)
        {
            final Conn c = unflushed.get(i);
            c.unflushed = false;
            c.flush();
        }
        unflushed.clear();
    }

    private void drainUnsent(final String text)
    {
        Request r;
        while ((r = queue.poll()) != null)
        {
            answer(r, Wire.STATUS_NOT_LEADER, text);
        }
    }

    private void failPending(final String why)
    {
        // A split batch has one entry per order: answer it once.
        final Set<Pending> all = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        all.addAll(pending.values());
        pending.clear();
        for (final Pending p : all)
        {
            answer(p.request, Wire.STATUS_ERROR, why);
        }
    }

    private void expire(final long now)
    {
        state.forgetPositions(pending::containsKey);
        final Set<Pending> expired = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        for (final Iterator<Pending> it = pending.values().iterator(); it.hasNext(); )
        {
            final Pending p = it.next();
            if (now - p.request.sentNs > ANSWER_TIMEOUT_NS)
            {
                it.remove();
                expired.add(p);
            }
        }
        for (final Pending p : expired)
        {
            answer(p.request, Wire.STATUS_ERROR, "no answer from the cluster within 10s");
        }
    }

    // An idle gateway spins a little, then parks from 1 us up to 1 ms: it shares a few cores
    // with three nodes' Aeron agents, and a busy one never reaches the long parks.
    private final BackoffIdleStrategy idle = new BackoffIdleStrategy(10, 20, 1_000, 1_000_000);

    private void sleep()
    {
        idle.idle();
    }

    static String ingressEndpoints(final List<Node.Peer> peers, final int ingressPortOffset)
    {
        final StringBuilder sb = new StringBuilder();
        for (int i = 0; i < peers.size(); i++)
        {
            if (i > 0)
            {
                sb.append(',');
            }
            sb.append(i).append('=').append(peers.get(i).raftHost()).append(':').append(peers.get(i).raftPort() + ingressPortOffset);
        }
        return sb.toString();
    }
}
