-- memcached's proxy (memcached built with --enable-proxy) routing as memrelay routes, for the
-- lab's middleware = "memcached-proxy" and `make bench`'s memcached-proxy target. Written
-- against the proxy's own Lua API (mcp.pool, mcp.attach, mcp.await), which every proxy-enabled
-- memcached has since 1.6.13; routelib is not needed. plumbing/peers.py writes the settings
-- table in front of this file:
--
--   settings = { servers = { {"127.0.0.1", 11211}, ... },   -- the run's memcached servers
--                mode = "all" | "hashed",                   -- memrelay's --distribution all | ketama
--                copies = R,                                -- copies of each key (hashed mode)
--                read_any = true | false }                  -- reads from any copy (--read-from)
--
-- mode "all": every key on every server. A write goes to every server and is answered when
-- all have answered (memrelay's default write policy); a read goes to one server picked at
-- random (memrelay balances reads over the servers).
-- mode "hashed": R pools over the same servers, pool i with the list rotated by i. A pool picks
-- a backend from the key's hash and the list's length alone, so one key lands on R distinct
-- servers (R <= servers). Writes go to all R pools and wait for all; reads to the first pool,
-- or to any of them with read_any. R = 1 is plain hashing.
-- A multi-get (`get k1 k2 ...`) is split by the proxy into one request per key, each routed
-- by this function: hashed multi-gets.

function mcp_config_pools(old)
    local backends = {}
    for i, server in ipairs(settings.servers) do
        backends[i] = mcp.backend("s" .. i, server[1], server[2])
    end
    -- Keyed by name: this proxy copies only string-keyed tables from the configuration's VM to
    -- the workers' (an array of pools arrives empty).
    local pools = {}
    if settings.mode == "all" then
        for i, backend in ipairs(backends) do
            pools["p" .. i] = mcp.pool({ backend })
        end
    else
        local n = #backends
        for copy = 1, settings.copies do
            local rotated = {}
            for i = 1, n do
                rotated[i] = backends[((i - 1 + copy - 1) % n) + 1]
            end
            pools["p" .. copy] = mcp.pool(rotated)
        end
    end
    return pools
end

-- Reads pick a copy, writes go to every copy and return the first failure or the first reply.
local function is_read(r)
    local command = r:command()
    return command == mcp.CMD_GET or command == mcp.CMD_GETS or command == mcp.CMD_MG
end

function mcp_config_routes(named)
    local pools = {}
    for i = 1, (settings.mode == "all" and #settings.servers or settings.copies) do
        pools[i] = named["p" .. i]
    end
    local count = #pools
    local random = math.random
    local read_any = settings.mode == "all" or settings.read_any
    if mcp.funcgen_new then
        -- 1.6.2x and later: routes are function generators over handles (pool(r) and mcp.await are gone).
        local fgen = mcp.funcgen_new()
        local handles = {}
        for i = 1, count do
            handles[i] = fgen:new_handle(pools[i])
        end
        fgen:ready({ n = "memrelay", f = function(rctx)
            return function(r)
                if is_read(r) or count == 1 then
                    local pick = (read_any and count > 1) and random(count) or 1
                    return rctx:enqueue_and_wait(r, handles[pick])
                end
                rctx:enqueue(r, handles)
                rctx:wait_cond(count, mcp.WAIT_ANY)
                for i = 1, count do
                    local result = rctx:res_any(handles[i])
                    if result == nil or not result:ok() then
                        return result
                    end
                end
                return rctx:res_any(handles[1])
            end
        end })
        mcp.attach(mcp.CMD_ANY_STORAGE, fgen)
        return
    end
    -- 1.6.13 to 1.6.1x: plain functions, pools called directly, mcp.await.
    local await = mcp.await
    local first = pools[1]
    mcp.attach(mcp.CMD_ANY_STORAGE, function(r)
        if is_read(r) or count == 1 then
            if count == 1 or not read_any then
                return first(r)
            end
            return pools[random(count)](r)
        end
        local results = await(r, pools)
        for _, result in ipairs(results) do
            if not result:ok() then
                return result
            end
        end
        return results[1]
    end)
end
