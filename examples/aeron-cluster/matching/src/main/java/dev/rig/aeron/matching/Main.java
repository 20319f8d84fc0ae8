package dev.rig.aeron.matching;

import dev.rig.aeron.Introspection;
import dev.rig.aeron.RigAeron;

/** The example matching engine as one rig node: its service, codec, state hash, resting orders and held order ids handed to rig-aeron. */
public final class Main
{
    /**
     * -Drig.example.trap: a deliberate misfit, so the harness's traps can be seen named (docs/engines.md):
     * "wrong-correlation-id" (the codec misreads every answer's id) or "throw-every=N" (MatchingService).
     */
    static final String TRAP = System.getProperty("rig.example.trap", "");

    private Main()
    {
    }

    public static void main(final String[] args)
    {
        final MatchingService service = new MatchingService();
        RigAeron.node(args)
            .service(service)
            .codec(new MatchingCodec())
            .introspection(new Introspection()
            {
                @Override
                public long stateHash()
                {
                    return service.stateHash();
                }

                @Override
                public long restingOrders()
                {
                    return service.orders();
                }

                @Override
                public long[][] heldOrderIds()
                {
                    return service.heldOrderIds();
                }
            })
            .run();
    }
}
