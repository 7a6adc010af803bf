// example.cpp - the C++ client against a live bridge: hello, act, and a session with a death.
//
//   g++ -std=c++17 -O1 -I bridge/clients/cpp bridge/clients/cpp/example.cpp -lzmq -o village_example
//   village serve --policy scripted &
//   ./village_example tcp://127.0.0.1:5555 worlds/data/village-v1.toml
//
// Prints one line per result (the test suite parses them).
#include "village_bridge.hpp"

#include <fstream>
#include <iostream>
#include <sstream>

// The server's message of an error reply (what() is "code: message").
static std::string message(const village_bridge::Error& e) { return std::string(e.what()).substr(e.code.size() + 2); }

int main(int argc, char** argv) {
    if (argc < 3) {
        std::cerr << "usage: " << argv[0] << " ENDPOINT WORLD.toml\n";
        return 2;
    }
    try {
        village_bridge::Client bridge(argv[1], 5000, 3);

        const auto info = bridge.hello("village-bridge-cpp-example");
        std::cout << "hello protocol=" << info.protocol << " obs_dim=" << info.obs_dim
                  << " n_actions=" << info.n_actions << " policy=" << info.policy << "\n";

        const uint32_t rows = 16;
        std::vector<float> obs(static_cast<size_t>(rows) * info.obs_dim, 0.0f);
        std::vector<uint8_t> mask(static_cast<size_t>(rows) * info.n_actions, 1);
        const auto actions = bridge.act(obs, rows, info.obs_dim, &mask, info.n_actions, true);
        std::cout << "act rows=" << actions.size() << " actions=";
        for (size_t i = 0; i < actions.size(); ++i) std::cout << (i ? "," : "") << actions[i];
        std::cout << "\n";
        try {  // a request's own sampling temperature (the scripted rules have none to sharpen)
            bridge.act(obs, rows, info.obs_dim, &mask, info.n_actions, false, 0.5);
            std::cout << "temperature accepted\n";
        } catch (const village_bridge::Error& e) {
            std::cout << "temperature error code=" << e.code << "\n";
        }
        try {  // a request's own personality strength (the scripted rules have no learned personality)
            bridge.act(obs, rows, info.obs_dim, &mask, info.n_actions, false, std::nullopt, 2.0);
            std::cout << "personality_strength accepted\n";
        } catch (const village_bridge::Error& e) {
            std::cout << "personality_strength error code=" << e.code << " message=" << message(e) << "\n";
        }

        std::ifstream file(argv[2]);
        std::stringstream toml;
        toml << file.rdbuf();
        try {  // a session's own personality strength: refused alike, and nothing is made of the refused create
            bridge.session_create_world(toml.str(), 0, std::nullopt, 2.0);
            std::cout << "session personality_strength accepted\n";
        } catch (const village_bridge::Error& e) {
            std::cout << "session personality_strength error code=" << e.code << "\n";
        }
        const std::string session = bridge.session_create_world(toml.str(), 0);
        std::cout << "session id=" << session << " npcs=" << bridge.npcs().size()
                  << " actors=" << bridge.actors().size() << "\n";

        const std::string victim = bridge.npcs().at(0);
        const int64_t death = bridge.session_event(session, "death", "player", victim);
        std::cout << "event death number=" << death << " victim=" << victim << "\n";

        for (int tick = 0; tick < 10; ++tick) {
            const auto step = bridge.session_step(session);
            for (const auto& e : step.events)
                std::cout << "step tick=" << step.tick << " event=" << e.type << " number=" << e.event
                          << " actor=" << e.actor << " target=" << e.target << "\n";
            for (const auto& r : step.reactions) {
                if (r.npc == victim && tick == 0) std::cout << "victim " << r.npc << " alive=" << r.alive << "\n";
                if (r.reaction == "none") continue;
                std::cout << "reaction tick=" << step.tick << " npc=" << r.npc << " reaction=" << r.reaction
                          << " action=" << r.action << " target=" << r.target << " cause=" << r.cause
                          << " intensity=" << r.intensity << (r.bark.empty() ? "" : " bark=\"" + r.bark + "\"")
                          << "\n";
            }
        }
        bridge.session_close(session);
        std::cout << "closed " << session << "\n";
        try {
            bridge.session_step(session);
        } catch (const village_bridge::Error& e) {
            std::cout << "error code=" << e.code << "\n";
        }
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
