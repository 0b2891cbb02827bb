// coopsim-ns3-bridge: the ns-3 side of coopsim's ns3-v0 channel.
//
// A child process of the Python channel (coopsim/comm/ns3/channel.py). It talks over its stdin and
// stdout pipes only (it opens no socket of the operating system, so nothing listens anywhere), in
// little-endian binary frames:
//
//   request  'R' u32 n, n bytes of "key=value\n" text   reset: rebuild every network, RngSeed/RngRun
//            'S' u32 M, f64 t_start_s, f64 t_end_s, f64 bg_rate_bps,
//                f64 positions[E*N*3], M x {u32 env, u32 src, i32 dst, u32 size_bytes, u32 id}
//                                                        step: move nodes, send, run to t_end_s
//            'Q'                                         quit
//   reply    'K' u32 n, n bytes of payload               ok
//            'E' u32 n, n bytes of text                  error (the Python side raises ChannelError)
//   step reply payload: u32 K, f64 now_s, u64 bg_tx_bytes, u64 bg_rx_bytes,
//                       K x {u32 id, u32 receiver, f64 t_rx_s}
//
// One isolated ad-hoc Wi-Fi network (its own YansWifiChannel) per coopsim env: N agent nodes plus
// 2 * background_pairs extra nodes. Each coopsim message is one UDP datagram whose IP packet is
// size_bytes long (payload size_bytes - 28); a 4-byte packet tag (not on air) carries its id.
// An EOF on stdin (the parent died) ends the process, and so does the parent's death (PDEATHSIG).
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/mobility-module.h"
#include "ns3/network-module.h"
#include "ns3/propagation-module.h"
#include "ns3/wifi-module.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

using namespace ns3;

namespace
{

const uint16_t kAgentPort = 9000;
const uint16_t kBgPort = 9001;
const uint32_t kUdpIpHeader = 28;

class MsgTag : public Tag
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("coopsim::MsgTag").SetParent<Tag>().AddConstructor<MsgTag>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override { return GetTypeId(); }

    uint32_t GetSerializedSize() const override { return 4; }

    void Serialize(TagBuffer i) const override { i.WriteU32(id); }

    void Deserialize(TagBuffer i) override { id = i.ReadU32(); }

    void Print(std::ostream& os) const override { os << "id=" << id; }

    uint32_t id = 0;
};

struct Reception
{
    uint32_t id;
    uint32_t receiver;
    double t_rx_s;
};

struct Env
{
    std::vector<Ptr<Socket>> agentSockets;
    std::vector<Ipv4Address> agentAddr;
    std::vector<Ptr<MobilityModel>> mobility;
    std::vector<Ptr<Socket>> bgSockets; // senders (even) and receivers (odd)
    std::vector<Ipv4Address> bgAddr;
};

struct BgPair
{
    uint32_t env;
    uint32_t pair;
    bool scheduled;
};

// ---- state of the current episode -------------------------------------------------------------
std::map<std::string, std::string> g_cfg;
uint32_t g_numEnvs = 0;
uint32_t g_numAgents = 0;
std::vector<Env> g_envs;
std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> g_nodeToAgent; // node id -> (env, slot)
std::vector<Reception> g_rx;
std::vector<BgPair> g_bgPairs;
Ptr<UniformRandomVariable> g_jitter;
Ptr<ExponentialRandomVariable> g_bgGap;
double g_bgRateBps = 0.0;
uint32_t g_bgPacketBytes = 1000;
bool g_bgPoisson = true;
uint64_t g_bgTxBytes = 0;
uint64_t g_bgRxBytes = 0;
double g_jitterS = 0.0;

std::string
Cfg(const std::string& key)
{
    auto it = g_cfg.find(key);
    if (it == g_cfg.end())
    {
        throw std::runtime_error("missing config key '" + key + "'");
    }
    return it->second;
}

double
CfgD(const std::string& key)
{
    return std::stod(Cfg(key));
}

uint64_t
CfgU(const std::string& key)
{
    return std::stoull(Cfg(key));
}

// ---- pipes --------------------------------------------------------------------------------------
bool
ReadExact(void* buf, size_t n)
{
    return std::fread(buf, 1, n, stdin) == n;
}

template <typename T>
T
ReadVal()
{
    T v;
    if (!ReadExact(&v, sizeof(T)))
    {
        std::exit(0); // parent closed the pipe: nothing to do any more
    }
    return v;
}

FILE* g_reply = nullptr; // the original stdout; fd 1 itself goes to stderr so no ns-3 print can corrupt a frame

void
Reply(char tag, const std::string& payload)
{
    uint32_t n = payload.size();
    std::fwrite(&tag, 1, 1, g_reply);
    std::fwrite(&n, 4, 1, g_reply);
    std::fwrite(payload.data(), 1, n, g_reply);
    std::fflush(g_reply);
}

template <typename T>
void
Put(std::string& out, const T& v)
{
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// ---- ns-3 callbacks -----------------------------------------------------------------------------
void
OnAgentRecv(Ptr<Socket> socket)
{
    Ptr<Packet> p;
    Address from;
    while ((p = socket->RecvFrom(from)))
    {
        MsgTag tag;
        if (!p->PeekPacketTag(tag))
        {
            continue;
        }
        auto it = g_nodeToAgent.find(socket->GetNode()->GetId());
        if (it == g_nodeToAgent.end())
        {
            continue;
        }
        g_rx.push_back(Reception{tag.id, it->second.second, Simulator::Now().GetSeconds()});
    }
}

void
OnBgRecv(Ptr<Socket> socket)
{
    Ptr<Packet> p;
    Address from;
    while ((p = socket->RecvFrom(from)))
    {
        g_bgRxBytes += p->GetSize() + kUdpIpHeader;
    }
}

void
SendMsg(Ptr<Socket> socket, Ipv4Address dst, uint32_t sizeBytes, uint32_t id)
{
    uint32_t payload = sizeBytes > kUdpIpHeader ? sizeBytes - kUdpIpHeader : 0;
    Ptr<Packet> p = Create<Packet>(payload);
    MsgTag tag;
    tag.id = id;
    p->AddPacketTag(tag);
    socket->SendTo(p, 0, InetSocketAddress(dst, kAgentPort));
}

void
BgTick(uint32_t k)
{
    BgPair& bp = g_bgPairs[k];
    if (g_bgRateBps <= 0.0)
    {
        bp.scheduled = false;
        return;
    }
    Env& env = g_envs[bp.env];
    Ptr<Packet> p = Create<Packet>(g_bgPacketBytes - kUdpIpHeader);
    if (env.bgSockets[2 * bp.pair]->SendTo(p, 0, InetSocketAddress(env.bgAddr[2 * bp.pair + 1], kBgPort)) >= 0)
    {
        g_bgTxBytes += g_bgPacketBytes;
    }
    double mean = g_bgPacketBytes * 8.0 / g_bgRateBps;
    double gap = g_bgPoisson ? g_bgGap->GetValue(mean, 0.0) : mean;
    Simulator::Schedule(Seconds(gap), &BgTick, k);
}

// ---- reset: build every network -----------------------------------------------------------------
WifiStandard
ParseStandard(const std::string& s)
{
    if (s == "802.11a")
        return WIFI_STANDARD_80211a;
    if (s == "802.11b")
        return WIFI_STANDARD_80211b;
    if (s == "802.11g")
        return WIFI_STANDARD_80211g;
    if (s == "802.11n")
        return WIFI_STANDARD_80211n;
    throw std::runtime_error("unknown Wi-Fi standard '" + s + "'");
}

void
ClearEpisode()
{
    g_envs.clear();
    g_nodeToAgent.clear();
    g_rx.clear();
    g_bgPairs.clear();
    g_jitter = nullptr;
    g_bgGap = nullptr;
    Simulator::Destroy();
    Ipv4AddressGenerator::Reset();
}

void
BuildEpisode()
{
    ClearEpisode();
    RngSeedManager::SetSeed(static_cast<uint32_t>(CfgU("rng_seed")));
    RngSeedManager::SetRun(CfgU("rng_run"));
    g_numEnvs = CfgU("num_envs");
    g_numAgents = CfgU("num_agents");
    const uint32_t numBgPairs = CfgU("background_pairs");
    g_bgPacketBytes = std::max<uint32_t>(CfgU("background_packet_bytes"), kUdpIpHeader);
    g_bgPoisson = CfgU("background_poisson") != 0;
    g_bgRateBps = 0.0;
    g_bgTxBytes = g_bgRxBytes = 0;
    g_jitterS = CfgD("send_jitter_s");
    const std::string standard = Cfg("standard");
    const std::string manager = Cfg("rate_manager");
    const std::string dataMode = Cfg("data_mode");
    const double txPowerDbm = CfgD("tx_power_dbm");
    const double bgX = CfgD("background_x_m"), bgY = CfgD("background_y_m"), bgZ = CfgD("background_z_m");
    // MAC queue lifetime: frames queued longer are dropped by the MAC itself (ns-3's default is 500 ms)
    Config::SetDefault("ns3::WifiMacQueue::MaxDelay", TimeValue(Seconds(CfgD("mac_queue_max_delay_s"))));

    // explicit stream numbers: same RngSeed/RngRun -> same draws, whatever happened before in this process
    int64_t stream = 1;
    g_jitter = CreateObject<UniformRandomVariable>();
    g_jitter->SetStream(stream++);
    g_bgGap = CreateObject<ExponentialRandomVariable>();
    g_bgGap->SetStream(stream++);

    g_envs.resize(g_numEnvs);
    for (uint32_t e = 0; e < g_numEnvs; ++e)
    {
        Env& env = g_envs[e];
        const uint32_t numNodes = g_numAgents + 2 * numBgPairs;
        NodeContainer nodes;
        nodes.Create(numNodes);

        Ptr<YansWifiChannel> channel = CreateObject<YansWifiChannel>();
        channel->SetPropagationDelayModel(CreateObject<ConstantSpeedPropagationDelayModel>());
        Ptr<LogDistancePropagationLossModel> logd = CreateObject<LogDistancePropagationLossModel>();
        logd->SetAttribute("Exponent", DoubleValue(CfgD("log_distance_exponent")));
        logd->SetAttribute("ReferenceDistance", DoubleValue(CfgD("reference_distance_m")));
        logd->SetAttribute("ReferenceLoss", DoubleValue(CfgD("reference_loss_db")));
        if (CfgU("nakagami") != 0)
        {
            Ptr<NakagamiPropagationLossModel> nak = CreateObject<NakagamiPropagationLossModel>();
            nak->SetAttribute("m0", DoubleValue(CfgD("nakagami_m0")));
            nak->SetAttribute("m1", DoubleValue(CfgD("nakagami_m1")));
            nak->SetAttribute("m2", DoubleValue(CfgD("nakagami_m2")));
            nak->SetAttribute("Distance1", DoubleValue(CfgD("nakagami_distance1_m")));
            nak->SetAttribute("Distance2", DoubleValue(CfgD("nakagami_distance2_m")));
            logd->SetNext(nak);
        }
        channel->SetPropagationLossModel(logd);

        YansWifiPhyHelper phy;
        phy.SetChannel(channel);
        phy.Set("TxPowerStart", DoubleValue(txPowerDbm));
        phy.Set("TxPowerEnd", DoubleValue(txPowerDbm));
        if (standard == "802.11n")
        {
            phy.Set("ChannelSettings", StringValue("{0, 20, BAND_5GHZ, 0}"));
        }
        WifiHelper wifi;
        wifi.SetStandard(ParseStandard(standard));
        if (manager == "constant")
        {
            wifi.SetRemoteStationManager("ns3::ConstantRateWifiManager",
                                         "DataMode", StringValue(dataMode),
                                         "ControlMode", StringValue(Cfg("control_mode")),
                                         "NonUnicastMode", StringValue(dataMode));
        }
        else if (manager == "minstrel")
        {
            wifi.SetRemoteStationManager(standard == "802.11n" ? "ns3::MinstrelHtWifiManager"
                                                               : "ns3::MinstrelWifiManager");
        }
        else
        {
            throw std::runtime_error("unknown rate manager '" + manager + "'");
        }
        WifiMacHelper mac;
        mac.SetType("ns3::AdhocWifiMac");
        NetDeviceContainer devices = wifi.Install(phy, mac, nodes);

        MobilityHelper mobility;
        mobility.SetMobilityModel("ns3::ConstantPositionMobilityModel");
        mobility.Install(nodes);
        for (uint32_t i = 0; i < numNodes; ++i)
        {
            Ptr<MobilityModel> m = nodes.Get(i)->GetObject<MobilityModel>();
            if (i < g_numAgents)
            {
                env.mobility.push_back(m);
            }
            else
            {
                // background pairs side by side (1 m apart) around the configured point
                uint32_t j = i - g_numAgents;
                m->SetPosition(Vector(bgX + (j % 2), bgY + (j / 2), bgZ));
            }
        }

        InternetStackHelper internet;
        internet.Install(nodes);
        Ipv4AddressHelper addresses;
        std::ostringstream net;
        net << (10 + e / 256) // a /16 per env: 10.e.0.0 for e < 256
            << "." << (e % 256) << ".0.0";
        addresses.SetBase(Ipv4Address(net.str().c_str()), "255.255.0.0");
        Ipv4InterfaceContainer ifaces = addresses.Assign(devices);

        stream += wifi.AssignStreams(devices, stream);
        stream += channel->AssignStreams(stream);
        stream += internet.AssignStreams(nodes, stream);

        for (uint32_t i = 0; i < numNodes; ++i)
        {
            Ptr<Socket> s = Socket::CreateSocket(nodes.Get(i), UdpSocketFactory::GetTypeId());
            s->SetAllowBroadcast(true);
            if (i < g_numAgents)
            {
                s->Bind(InetSocketAddress(Ipv4Address::GetAny(), kAgentPort));
                s->SetRecvCallback(MakeCallback(&OnAgentRecv));
                env.agentSockets.push_back(s);
                env.agentAddr.push_back(ifaces.GetAddress(i));
                g_nodeToAgent[nodes.Get(i)->GetId()] = {e, i};
            }
            else
            {
                s->Bind(InetSocketAddress(Ipv4Address::GetAny(), kBgPort));
                s->SetRecvCallback(MakeCallback(&OnBgRecv));
                env.bgSockets.push_back(s);
                env.bgAddr.push_back(ifaces.GetAddress(i));
            }
        }
        for (uint32_t k = 0; k < numBgPairs; ++k)
        {
            g_bgPairs.push_back(BgPair{e, k, false});
        }
    }
    // static ARP entries: no ARP exchange delays the first unicast or adds traffic
    NeighborCacheHelper neighbors;
    neighbors.PopulateNeighborCache();
}

// ---- step ---------------------------------------------------------------------------------------
#pragma pack(push, 1)

struct WireMsg
{
    uint32_t env;
    uint32_t src;
    int32_t dst;
    uint32_t size;
    uint32_t id;
};

#pragma pack(pop)

void
RunUntil(double tS)
{
    Time target = Seconds(tS);
    if (target > Simulator::Now())
    {
        Simulator::Stop(target - Simulator::Now());
        Simulator::Run();
    }
}

std::string
Step()
{
    uint32_t m = ReadVal<uint32_t>();
    double tStart = ReadVal<double>();
    double tEnd = ReadVal<double>();
    double bgRate = ReadVal<double>();
    std::vector<double> pos(static_cast<size_t>(g_numEnvs) * g_numAgents * 3);
    std::vector<WireMsg> msgs(m);
    if (!ReadExact(pos.data(), pos.size() * sizeof(double)) ||
        (m && !ReadExact(msgs.data(), m * sizeof(WireMsg))))
    {
        std::exit(0);
    }
    if (g_envs.empty())
    {
        throw std::runtime_error("step before reset");
    }
    RunUntil(tStart); // catch up over steps without messages
    for (uint32_t e = 0; e < g_numEnvs; ++e)
    {
        for (uint32_t i = 0; i < g_numAgents; ++i)
        {
            const double* p = &pos[(static_cast<size_t>(e) * g_numAgents + i) * 3];
            g_envs[e].mobility[i]->SetPosition(Vector(p[0], p[1], p[2]));
        }
    }
    g_bgRateBps = bgRate;
    if (bgRate > 0.0)
    {
        for (uint32_t k = 0; k < g_bgPairs.size(); ++k)
        {
            if (!g_bgPairs[k].scheduled)
            {
                g_bgPairs[k].scheduled = true;
                double mean = g_bgPacketBytes * 8.0 / bgRate;
                Simulator::Schedule(Seconds(g_jitter->GetValue(0.0, mean)), &BgTick, k);
            }
        }
    }
    std::unordered_map<uint64_t, double> senderDelay; // one jitter per sender and step: its messages leave in order
    for (const WireMsg& w : msgs)
    {
        if (w.env >= g_numEnvs || w.src >= g_numAgents || (w.dst >= 0 && static_cast<uint32_t>(w.dst) >= g_numAgents))
        {
            throw std::runtime_error("message out of range");
        }
        Env& env = g_envs[w.env];
        Ipv4Address dst = w.dst < 0 ? Ipv4Address("255.255.255.255") : env.agentAddr[w.dst];
        uint64_t sender = static_cast<uint64_t>(w.env) * g_numAgents + w.src;
        auto it = senderDelay.find(sender);
        if (it == senderDelay.end())
        {
            it = senderDelay.emplace(sender, g_jitterS > 0.0 ? g_jitter->GetValue(0.0, g_jitterS) : 0.0).first;
        }
        double delay = it->second;
        Simulator::Schedule(Seconds(delay), &SendMsg, env.agentSockets[w.src], dst, w.size, w.id);
    }
    RunUntil(tEnd);

    std::string out;
    out.reserve(28 + g_rx.size() * 16);
    Put<uint32_t>(out, g_rx.size());
    Put<double>(out, Simulator::Now().GetSeconds());
    Put<uint64_t>(out, g_bgTxBytes);
    Put<uint64_t>(out, g_bgRxBytes);
    for (const Reception& r : g_rx)
    {
        Put<uint32_t>(out, r.id);
        Put<uint32_t>(out, r.receiver);
        Put<double>(out, r.t_rx_s);
    }
    g_rx.clear();
    return out;
}

std::string
Reset()
{
    uint32_t n = ReadVal<uint32_t>();
    std::string text(n, '\0');
    if (n && !ReadExact(&text[0], n))
    {
        std::exit(0);
    }
    g_cfg.clear();
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
    {
        auto eq = line.find('=');
        if (eq != std::string::npos)
        {
            g_cfg[line.substr(0, eq)] = line.substr(eq + 1);
        }
    }
    BuildEpisode();
    std::string out;
    Put<double>(out, Simulator::Now().GetSeconds());
    return out;
}

} // namespace

int
main()
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::fflush(stdout);
    int replyFd = dup(1);
    dup2(2, 1);
    g_reply = fdopen(replyFd, "wb");
    if (g_reply == nullptr)
    {
        return 3;
    }
    std::setvbuf(g_reply, nullptr, _IOFBF, 1 << 16);
    while (true)
    {
        char op;
        if (!ReadExact(&op, 1))
        {
            break;
        }
        try
        {
            if (op == 'R')
            {
                Reply('K', Reset());
            }
            else if (op == 'S')
            {
                Reply('K', Step());
            }
            else if (op == 'Q')
            {
                Reply('K', "");
                break;
            }
            else
            {
                Reply('E', std::string("unknown request '") + op + "'");
                break;
            }
        }
        catch (const std::exception& ex)
        {
            Reply('E', ex.what());
        }
    }
    ClearEpisode();
    return 0;
}
