// village_bridge.hpp - header-only C++17 client of the village NPC bridge (ZeroMQ + msgpack).
//
// Dependencies: cppzmq (zmq.hpp, libzmq) and msgpack-cxx (header-only). On Debian/Ubuntu:
//     apt-get install libzmq3-dev cppzmq-dev libmsgpack-cxx-dev
// Build:  g++ -std=c++17 -DMSGPACK_NO_BOOST your_game.cpp -lzmq
// Unreal: add the two header libraries and libzmq to a module's Build.cs (PublicIncludePaths /
// PublicAdditionalLibraries); call the client from a worker thread, never the game thread.
//
// Protocol: docs/protocol.md. Each request is one msgpack map {"v", "id", "op", ...}; replies are
// {"v", "id", "ok": true, ...} or {"ok": false, "error": {"code", "message"}}. Arrays travel as
// {"dtype", "shape", "data": <bin, little-endian>} (this header assumes a little-endian host).
//
// The client is Lazy Pirate: a REQ socket, a poll timeout per attempt, and on silence the same request
// (same id, same bytes) re-sent on the same socket, `retries` times (ZMQ_REQ_RELAXED lets a REQ socket
// send again without a reply; ZMQ_REQ_CORRELATE drops a late reply to an earlier attempt; libzmq
// reconnects to a restarted server by itself). The server answers a repeated session.create/
// session.event/session.step from its replay cache, so a retry never applies anything twice; creates
// are remembered per connection, and request ids start from a random base, so two games (or a
// restarted one) never share a session. Not thread-safe: one Client per thread.
#pragma once

#ifndef MSGPACK_NO_BOOST
#define MSGPACK_NO_BOOST
#endif

#include <zmq.hpp>
#include <msgpack.hpp>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace village_bridge {

constexpr int kProtocolVersion = 1;

// The server answered ok=false (code and message from the reply), or did not answer (code "timeout").
struct Error : std::runtime_error {
    std::string code;
    Error(std::string c, const std::string& message)
        : std::runtime_error(c + ": " + message), code(std::move(c)) {}
};

using Packer = msgpack::packer<msgpack::sbuffer>;

// ------------------------------------------------------------------------------------------ msgpack helpers
inline const msgpack::object* find(const msgpack::object& map, const char* key) {
    if (map.type != msgpack::type::MAP) return nullptr;
    const size_t n = std::strlen(key);
    for (uint32_t i = 0; i < map.via.map.size; ++i) {
        const auto& kv = map.via.map.ptr[i];
        if (kv.key.type == msgpack::type::STR && kv.key.via.str.size == n &&
            std::memcmp(kv.key.via.str.ptr, key, n) == 0)
            return &kv.val;
    }
    return nullptr;
}

inline const msgpack::object& at(const msgpack::object& map, const char* key) {
    const msgpack::object* v = find(map, key);
    if (!v) throw Error("bad_reply", std::string("reply has no field '") + key + "'");
    return *v;
}

inline std::string str(const msgpack::object& o) {
    if (o.type == msgpack::type::NIL) return {};
    return o.as<std::string>();
}

inline void pack_str(Packer& pk, const std::string& s) { pk.pack(s); }

template <typename T>
inline void pack_array(Packer& pk, const char* dtype, const T* data, const std::vector<uint32_t>& shape) {
    size_t count = 1;
    for (auto d : shape) count *= d;
    pk.pack_map(3);
    pk.pack(std::string("dtype"));
    pk.pack(std::string(dtype));
    pk.pack(std::string("shape"));
    pk.pack_array(static_cast<uint32_t>(shape.size()));
    for (auto d : shape) pk.pack(d);
    pk.pack(std::string("data"));
    const uint32_t bytes = static_cast<uint32_t>(count * sizeof(T));
    pk.pack_bin(bytes);
    pk.pack_bin_body(reinterpret_cast<const char*>(data), bytes);
}

// A decoded array reply field, e.g. act's "actions" (int32).
template <typename T>
inline std::vector<T> unpack_array(const msgpack::object& arr) {
    const auto& data = at(arr, "data");
    if (data.type != msgpack::type::BIN || data.via.bin.size % sizeof(T) != 0)
        throw Error("bad_reply", "array data is not bin of the expected item size");
    std::vector<T> out(data.via.bin.size / sizeof(T));
    std::memcpy(out.data(), data.via.bin.ptr, data.via.bin.size);
    return out;
}

// ------------------------------------------------------------------------------------------ results
struct Hello {
    int protocol = 0;
    std::string package_version, policy;
    int obs_dim = 0, n_actions = 0, slots = 0;
    std::vector<std::string> action_names, reaction_names, observation_layout;
};

struct Reaction {
    std::string npc, action, target, reaction, bark;  // target and bark empty when absent
    bool alive = true;
    double intensity = 0.0;
    int64_t cause = -1;  // the session event number behind the reaction, -1 none
};

struct SessionEvent {
    int64_t event = 0;
    std::string type, actor, target;
};

struct StepResult {
    int64_t tick = 0;
    std::vector<Reaction> reactions;
    std::vector<SessionEvent> events;
};

// Optional bodies for session_step: entity order is NPCs then actors (session.create's reply).
struct Bodies {
    const float* pos = nullptr;      // (E, 2)
    const float* health = nullptr;   // (E,)
    const uint8_t* alive = nullptr;  // (E,)
    uint32_t entities = 0;
};

// ------------------------------------------------------------------------------------------ the client
class Client {
public:
    explicit Client(std::string endpoint, int timeout_ms = 2000, int retries = 3)
        : endpoint_(std::move(endpoint)), timeout_ms_(timeout_ms), retries_(retries), ctx_(1) {
        // ids from a random base below 2^52 (exact in every client's number type, JavaScript's included)
        std::random_device rd;
        next_id_ = static_cast<int64_t>(((static_cast<uint64_t>(rd()) << 32) | rd()) & ((1ULL << 52) - 1)) >> 1;
        connect();
    }

    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // Send one request: `write_fields` packs `n_fields` key/value pairs after v, id and op.
    template <typename F>
    msgpack::object_handle request(const std::string& op, uint32_t n_fields, F&& write_fields) {
        const int64_t id = ++next_id_;
        msgpack::sbuffer buf;
        Packer pk(&buf);
        pk.pack_map(3 + n_fields);
        pk.pack(std::string("v"));
        pk.pack(kProtocolVersion);
        pk.pack(std::string("id"));
        pk.pack(id);
        pk.pack(std::string("op"));
        pk.pack(op);
        write_fields(pk);
        msgpack::object_handle reply = send_with_retries(buf, id);
        const msgpack::object& obj = reply.get();
        const auto* ok = find(obj, "ok");
        if (!ok || ok->type != msgpack::type::BOOLEAN) throw Error("bad_reply", "reply has no boolean 'ok'");
        if (!ok->via.boolean) {
            const auto& err = at(obj, "error");
            throw Error(str(at(err, "code")), str(at(err, "message")));
        }
        return reply;
    }

    msgpack::object_handle request(const std::string& op) {
        return request(op, 0, [](Packer&) {});
    }

    double ping() { return at(request("ping").get(), "time").as<double>(); }

    Hello hello(const std::string& client_name = "village-bridge-cpp") {
        auto h = request("hello", 1, [&](Packer& pk) {
            pk.pack(std::string("client"));
            pk.pack(client_name);
        });
        const auto& o = h.get();
        Hello out;
        out.protocol = at(o, "protocol").as<int>();
        out.package_version = str(at(o, "package_version"));
        out.policy = str(at(o, "policy"));
        out.obs_dim = at(o, "obs_dim").as<int>();
        out.n_actions = at(o, "n_actions").as<int>();
        out.slots = at(o, "slots").as<int>();
        out.action_names = at(o, "action_names").as<std::vector<std::string>>();
        out.reaction_names = at(o, "reaction_names").as<std::vector<std::string>>();
        out.observation_layout = at(o, "observation_layout").as<std::vector<std::string>>();
        return out;
    }

    // Stateless batched query: obs (rows x obs_dim) float32, optional mask (rows x n_actions) 0/1; temperature:
    // sample from softmax(logits / T) instead of the server's temperature (not with deterministic);
    // personality_strength: play each NPC's learned personality S times as strongly (0 to 10, 1 as trained)
    // instead of the server's strength.
    std::vector<int32_t> act(const std::vector<float>& obs, uint32_t rows, uint32_t obs_dim,
                             const std::vector<uint8_t>* mask = nullptr, uint32_t n_actions = 0,
                             bool deterministic = false, std::optional<double> temperature = std::nullopt,
                             std::optional<double> personality_strength = std::nullopt) {
        if (obs.size() != static_cast<size_t>(rows) * obs_dim) throw Error("bad_request", "obs size != rows*obs_dim");
        if (mask && mask->size() != static_cast<size_t>(rows) * n_actions)
            throw Error("bad_request", "mask size != rows*n_actions");
        const uint32_t n = 1 + (mask ? 1 : 0) + (deterministic ? 1 : 0) + (temperature ? 1 : 0) +
                           (personality_strength ? 1 : 0);
        auto r = request("act", n, [&](Packer& pk) {
            pk.pack(std::string("obs"));
            pack_array(pk, "float32", obs.data(), {rows, obs_dim});
            if (mask) {
                pk.pack(std::string("mask"));
                pack_array(pk, "uint8", mask->data(), {rows, n_actions});
            }
            if (deterministic) {
                pk.pack(std::string("deterministic"));
                pk.pack(true);
            }
            if (temperature) {
                pk.pack(std::string("temperature"));
                pk.pack(*temperature);
            }
            if (personality_strength) {
                pk.pack(std::string("personality_strength"));
                pk.pack(*personality_strength);
            }
        });
        return unpack_array<int32_t>(at(r.get(), "actions"));
    }

    // A session from a world file's TOML text; returns the session id. temperature: its NPCs sample from
    // softmax(logits / T) instead of the server's temperature; personality_strength: they play their learned
    // personalities S times as strongly (0 to 10, 1 as trained) instead of at the server's strength.
    std::string session_create_world(const std::string& toml, std::optional<int64_t> seed = std::nullopt,
                                     std::optional<double> temperature = std::nullopt,
                                     std::optional<double> personality_strength = std::nullopt) {
        const uint32_t n = 1 + (seed ? 1 : 0) + (temperature ? 1 : 0) + (personality_strength ? 1 : 0);
        auto r = request("session.create", n, [&](Packer& pk) {
            pk.pack(std::string("world"));
            pk.pack(toml);
            if (seed) {
                pk.pack(std::string("seed"));
                pk.pack(*seed);
            }
            if (temperature) {
                pk.pack(std::string("temperature"));
                pk.pack(*temperature);
            }
            if (personality_strength) {
                pk.pack(std::string("personality_strength"));
                pk.pack(*personality_strength);
            }
        });
        const auto& o = r.get();
        npcs_ = at(o, "npcs").as<std::vector<std::string>>();
        actors_ = at(o, "actors").as<std::vector<std::string>>();
        return str(at(o, "session"));
    }

    // NPC and actor names of the last session created (entity order).
    const std::vector<std::string>& npcs() const { return npcs_; }
    const std::vector<std::string>& actors() const { return actors_; }

    // Queue a death/attack/gift/talk; actor empty = unknown; witnesses empty = the engine's sight test.
    int64_t session_event(const std::string& session, const std::string& type, const std::string& actor,
                          const std::string& target, const std::vector<std::string>& witnesses = {},
                          const float* position = nullptr) {
        const uint32_t n = 3 + (actor.empty() ? 0 : 1) + (witnesses.empty() ? 0 : 1) + (position ? 1 : 0);
        auto r = request("session.event", n, [&](Packer& pk) {
            pk.pack(std::string("session"));
            pk.pack(session);
            pk.pack(std::string("type"));
            pk.pack(type);
            pk.pack(std::string("target"));
            pk.pack(target);
            if (!actor.empty()) {
                pk.pack(std::string("actor"));
                pk.pack(actor);
            }
            if (!witnesses.empty()) {
                pk.pack(std::string("witnesses"));
                pk.pack(witnesses);
            }
            if (position) {
                pk.pack(std::string("position"));
                pk.pack_array(2);
                pk.pack(static_cast<double>(position[0]));
                pk.pack(static_cast<double>(position[1]));
            }
        });
        return at(r.get(), "event").as<int64_t>();
    }

    StepResult session_step(const std::string& session, const Bodies& bodies = {}) {
        const uint32_t n = 1 + (bodies.pos ? 1 : 0) + (bodies.health ? 1 : 0) + (bodies.alive ? 1 : 0);
        auto r = request("session.step", n, [&](Packer& pk) {
            pk.pack(std::string("session"));
            pk.pack(session);
            if (bodies.pos) {
                pk.pack(std::string("pos"));
                pack_array(pk, "float32", bodies.pos, {bodies.entities, 2});
            }
            if (bodies.health) {
                pk.pack(std::string("health"));
                pack_array(pk, "float32", bodies.health, {bodies.entities});
            }
            if (bodies.alive) {
                pk.pack(std::string("alive"));
                pack_array(pk, "uint8", bodies.alive, {bodies.entities});
            }
        });
        const auto& o = r.get();
        StepResult out;
        out.tick = at(o, "tick").as<int64_t>();
        const auto& reactions = at(o, "reactions");
        for (uint32_t i = 0; i < reactions.via.array.size; ++i) {
            const auto& e = reactions.via.array.ptr[i];
            Reaction x;
            x.npc = str(at(e, "npc"));
            x.alive = at(e, "alive").as<bool>();
            x.action = str(at(e, "action"));
            x.target = str(at(e, "target"));
            x.reaction = str(at(e, "reaction"));
            x.intensity = at(e, "intensity").as<double>();
            const auto& cause = at(e, "cause");
            x.cause = cause.type == msgpack::type::NIL ? -1 : cause.as<int64_t>();
            if (const auto* b = find(e, "bark")) x.bark = str(*b);
            out.reactions.push_back(std::move(x));
        }
        const auto& events = at(o, "events");
        for (uint32_t i = 0; i < events.via.array.size; ++i) {
            const auto& e = events.via.array.ptr[i];
            out.events.push_back({at(e, "event").as<int64_t>(), str(at(e, "type")), str(at(e, "actor")),
                                  str(at(e, "target"))});
        }
        return out;
    }

    void session_close(const std::string& session) {
        request("session.close", 1, [&](Packer& pk) {
            pk.pack(std::string("session"));
            pk.pack(session);
        });
    }

    int reconnects() const { return reconnects_; }

private:
    void connect() {
        sock_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::req);
        sock_->set(zmq::sockopt::linger, 0);
        sock_->set(zmq::sockopt::req_relaxed, 1);
        sock_->set(zmq::sockopt::req_correlate, 1);
        sock_->set(zmq::sockopt::rcvtimeo, timeout_ms_);
        sock_->set(zmq::sockopt::sndtimeo, timeout_ms_);
        sock_->connect(endpoint_);
    }

    msgpack::object_handle send_with_retries(const msgpack::sbuffer& buf, int64_t id) {
        for (int attempt = 0; attempt <= retries_; ++attempt) {
            // both bounded: a REQ socket with no live peer (a failed CURVE handshake) blocks in send
            if (!sock_->send(zmq::buffer(buf.data(), buf.size()), zmq::send_flags::none)) {
                ++reconnects_;
                continue;
            }
            // a blocking recv bounded by ZMQ_RCVTIMEO (a poll would also wake for a late reply to an earlier
            // attempt, which the correlating REQ socket then drops while recv waits on, unbounded)
            zmq::message_t msg;
            if (sock_->recv(msg, zmq::recv_flags::none)) {
                msgpack::object_handle oh =
                    msgpack::unpack(static_cast<const char*>(msg.data()), msg.size());
                const auto* rid = find(oh.get(), "id");
                if (rid && rid->type != msgpack::type::NIL &&
                    (rid->type == msgpack::type::POSITIVE_INTEGER || rid->type == msgpack::type::NEGATIVE_INTEGER) &&
                    rid->as<int64_t>() != id)
                    throw Error("bad_reply", "reply for another request id");
                return oh;
            }
            // silence: send the same bytes again (relaxed REQ), the server answers a retry from its cache
            ++reconnects_;
        }
        throw Error("timeout", "no reply from " + endpoint_ + " after " + std::to_string(retries_ + 1) +
                                   " attempts of " + std::to_string(timeout_ms_) + " ms");
    }

    std::string endpoint_;
    int timeout_ms_;
    int retries_;
    zmq::context_t ctx_;
    std::unique_ptr<zmq::socket_t> sock_;
    int64_t next_id_ = 0;
    int reconnects_ = 0;
    std::vector<std::string> npcs_, actors_;
};

}  // namespace village_bridge
