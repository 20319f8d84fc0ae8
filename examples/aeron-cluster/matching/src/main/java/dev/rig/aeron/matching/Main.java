package dev.rig.aeron.matching;

import dev.rig.aeron.Introspection;
import dev.rig.aeron.RigAeron;

/** The example matching engine as one rig node: its service, codec, state hash, resting orders and held order ids handed to rig-aeron. */
public final class Main
{
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
