package dev.rig.aeron;

import io.aeron.security.Authenticator;
import io.aeron.security.AuthenticatorSupplier;
import io.aeron.security.CredentialsSupplier;
import io.aeron.security.NullCredentialsSupplier;
import io.aeron.security.SessionProxy;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.agrona.collections.LongHashSet;

/**
 * Who may use the node's Aeron endpoints that listen on its network address: the Archive's control
 * channel (list, replay, truncate and purge recordings; a peer's archive replicates the log through
 * it) and the cluster's ingress (open a session, send to the service). Only the run's own nodes and
 * gateways: every engine of a run gets one secret from its target in {@link #ENV}
 * (engine/contract.go), and each endpoint accepts only a credential derived from it (HMAC-SHA256 of
 * the endpoint's name), compared in constant time. The secret itself never leaves the process and
 * is never logged; a derived credential travels only between the run's own processes.
 *
 * Member-to-member consensus traffic is not authenticated by Aeron; docs/security.md says what
 * protects it.
 */
final class RunAuth
{
    /** The run's secret, handed to every engine of the run by its target's agents. */
    static final String ENV = "RIG_CLUSTER_SECRET";

    private static final byte[] PRINCIPAL = "rig-run".getBytes(StandardCharsets.US_ASCII);

    private final byte[] archive;
    private final byte[] ingress;

    RunAuth(final byte[] secret)
    {
        if (secret.length == 0)
        {
            throw new IllegalArgumentException(ENV + " is empty");
        }
        archive = derive(secret, "rig-aeron archive control");
        ingress = derive(secret, "rig-aeron cluster ingress");
    }

    /** The run's credentials from {@link #ENV}, or null when the variable is unset or empty. */
    static RunAuth fromEnvironment()
    {
        final String s = System.getenv(ENV);
        return s == null || s.isEmpty() ? null : new RunAuth(s.getBytes(StandardCharsets.UTF_8));
    }

    /** What an archive client (local or a peer's replication) presents to the Archive's control channel. */
    static CredentialsSupplier archiveCredentials(final RunAuth a)
    {
        return a == null ? new NullCredentialsSupplier() : new Credentials(a.archive, "archive control");
    }

    /** What the gateway presents to the cluster's ingress. */
    static CredentialsSupplier ingressCredentials(final RunAuth a)
    {
        return a == null ? new NullCredentialsSupplier() : new Credentials(a.ingress, "cluster ingress");
    }

    /** The Archive's authenticator: one per archive conductor, which calls it from its own thread. */
    AuthenticatorSupplier archiveAuthenticator()
    {
        return new Supplier(archive, "archive control");
    }

    /** The consensus module's authenticator for ingress sessions. */
    AuthenticatorSupplier ingressAuthenticator()
    {
        return new Supplier(ingress, "cluster ingress");
    }

    private static byte[] derive(final byte[] secret, final String purpose)
    {
        try
        {
            final Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            return mac.doFinal(purpose.getBytes(StandardCharsets.US_ASCII));
        }
        catch (final GeneralSecurityException e)
        {
            throw new IllegalStateException("HmacSHA256: " + e.getMessage(), e);
        }
    }

    /** Aeron prints contexts (aeron.print.configuration); these say what they are, never the secret. */
    private record Credentials(byte[] credential, String endpoint) implements CredentialsSupplier
    {
        @Override
        public byte[] encodedCredentials()
        {
            return credential.clone();
        }

        @Override
        public byte[] onChallenge(final byte[] encodedChallenge)
        {
            // The authenticators below never challenge.
            return new byte[0];
        }

        @Override
        public String toString()
        {
            return "rig run credentials (" + endpoint + ")";
        }
    }

    private record Supplier(byte[] credential, String endpoint) implements AuthenticatorSupplier
    {
        @Override
        public Authenticator get()
        {
            return new Check(credential, endpoint);
        }

        @Override
        public String toString()
        {
            return "rig run authenticator (" + endpoint + ")";
        }
    }

    /** Accepts a session whose connect request carried the run's credential; rejects every other. */
    static final class Check implements Authenticator
    {
        private final byte[] want;
        private final String endpoint;
        private final LongHashSet accepted = new LongHashSet();

        Check(final byte[] want, final String endpoint)
        {
            this.want = want;
            this.endpoint = endpoint;
        }

        @Override
        public void onConnectRequest(final long sessionId, final byte[] encodedCredentials, final long nowMs)
        {
            if (MessageDigest.isEqual(want, encodedCredentials))
            {
                accepted.add(sessionId);
            }
        }

        @Override
        public void onChallengeResponse(final long sessionId, final byte[] encodedCredentials, final long nowMs)
        {
            // Never challenged: a response is not a way in.
        }

        @Override
        public void onConnectedSession(final SessionProxy session, final long nowMs)
        {
            final long id = session.sessionId();
            if (!accepted.contains(id))
            {
                session.reject();
            }
            else if (session.authenticate(PRINCIPAL))
            {
                accepted.remove(id);
            }
        }

        @Override
        public void onChallengedSession(final SessionProxy session, final long nowMs)
        {
            accepted.remove(session.sessionId());
            session.reject();
        }

        @Override
        public String toString()
        {
            return "rig run authenticator (" + endpoint + ")";
        }
    }
}
