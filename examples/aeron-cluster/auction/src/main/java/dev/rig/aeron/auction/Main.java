package dev.rig.aeron.auction;

import dev.rig.aeron.RigAeron;
import io.aeron.samples.cluster.tutorial.BasicAuctionClusteredService;

/**
 * Aeron's tutorial auction service, as Aeron ships it in aeron-all, as one rig node. It exposes
 * no state, so rig compares nodes by the hash of the snapshot each one writes at one log position.
 */
public final class Main
{
    private Main()
    {
    }

    public static void main(final String[] args)
    {
        RigAeron.node(args)
            .service(new BasicAuctionClusteredService())
            .codec(new AuctionCodec())
            .run();
    }
}
