// MsgPackLite.cs - the msgpack subset of the village bridge protocol, in plain C# (no package needed):
// null, bool, integers (smallest encoding, as msgpack-python writes them), double (float32 and float64 read),
// string (UTF-8), byte[] (bin), arrays (any IList, read as List<object>) and maps (any IDictionary, read as
// Dictionary<string, object>). Integers are read as long, floats as double. Extension types are refused.
using System;
using System.Collections;
using System.Collections.Generic;
using System.IO;
using System.Text;

namespace VillageBridge
{
    public sealed class MsgPackException : Exception
    {
        public MsgPackException(string message) : base(message) { }
    }

    public static class MsgPackLite
    {
        public const int MaxDepth = 64;

        public static byte[] Encode(object value)
        {
            var s = new MemoryStream();
            Write(s, value);
            return s.ToArray();
        }

        public static object Decode(byte[] data)
        {
            int at = 0;
            object value = Read(data, ref at, 0);
            if (at != data.Length) throw new MsgPackException($"{data.Length - at} trailing bytes after the value");
            return value;
        }

        static void Big(Stream s, ulong v, int bytes)
        {
            for (int i = bytes - 1; i >= 0; i--) s.WriteByte((byte)(v >> (8 * i)));
        }

        static void Head(Stream s, int fix, int fixMax, byte b8, byte b16, byte b32, int n)
        {
            if (fix >= 0 && n <= fixMax) s.WriteByte((byte)(fix | n));
            else if (b8 != 0 && n < 256) { s.WriteByte(b8); s.WriteByte((byte)n); }
            else if (n < 65536) { s.WriteByte(b16); Big(s, (ulong)n, 2); }
            else { s.WriteByte(b32); Big(s, (ulong)n, 4); }
        }

        static void WriteInt(Stream s, long v)
        {
            if (v >= 0)
            {
                if (v < 128) s.WriteByte((byte)v);
                else if (v < 256) { s.WriteByte(0xcc); s.WriteByte((byte)v); }
                else if (v < 65536) { s.WriteByte(0xcd); Big(s, (ulong)v, 2); }
                else if (v < 4294967296L) { s.WriteByte(0xce); Big(s, (ulong)v, 4); }
                else { s.WriteByte(0xcf); Big(s, (ulong)v, 8); }
            }
            else if (v >= -32) s.WriteByte((byte)(sbyte)v);
            else if (v >= -128) { s.WriteByte(0xd0); s.WriteByte((byte)(sbyte)v); }
            else if (v >= -32768) { s.WriteByte(0xd1); Big(s, (ulong)v, 2); }
            else if (v >= int.MinValue) { s.WriteByte(0xd2); Big(s, (ulong)v, 4); }
            else { s.WriteByte(0xd3); Big(s, (ulong)v, 8); }
        }

        public static void Write(Stream s, object value)
        {
            // an if-chain rather than a pattern switch: older C# compilers (mono's mcs, some Unity versions) lack them
            if (value == null) s.WriteByte(0xc0);
            else if (value is bool) s.WriteByte((bool)value ? (byte)0xc3 : (byte)0xc2);
            else if (value is int || value is long || value is short || value is sbyte || value is byte
                     || value is ushort || value is uint) WriteInt(s, Convert.ToInt64(value));
            else if (value is ulong)
            {
                if ((ulong)value > long.MaxValue) { s.WriteByte(0xcf); Big(s, (ulong)value, 8); }
                else WriteInt(s, (long)(ulong)value);
            }
            else if (value is float || value is double)
            {
                s.WriteByte(0xcb);
                Big(s, (ulong)BitConverter.DoubleToInt64Bits(Convert.ToDouble(value)), 8);
            }
            else if (value is string)
            {
                var utf8 = Encoding.UTF8.GetBytes((string)value);
                Head(s, 0xa0, 31, 0xd9, 0xda, 0xdb, utf8.Length);
                s.Write(utf8, 0, utf8.Length);
            }
            else if (value is byte[])
            {
                var bin = (byte[])value;
                Head(s, -1, -1, 0xc4, 0xc5, 0xc6, bin.Length);
                s.Write(bin, 0, bin.Length);
            }
            else if (value is IDictionary)
            {
                var map = (IDictionary)value;
                Head(s, 0x80, 15, 0, 0xde, 0xdf, map.Count);
                foreach (DictionaryEntry kv in map) { Write(s, kv.Key); Write(s, kv.Value); }
            }
            else if (value is IList)
            {
                var list = (IList)value;
                Head(s, 0x90, 15, 0, 0xdc, 0xdd, list.Count);
                foreach (var item in list) Write(s, item);
            }
            else throw new MsgPackException($"cannot encode a {value.GetType().Name}");
        }

        static void Need(byte[] d, int at, long n)
        {
            if (at + n > d.Length) throw new MsgPackException($"truncated: {n} bytes needed at offset {at}");
        }

        static ulong ReadBig(byte[] d, ref int at, int bytes)
        {
            Need(d, at, bytes);
            ulong v = 0;
            for (int i = 0; i < bytes; i++) v = (v << 8) | d[at++];
            return v;
        }

        static object Read(byte[] d, ref int at, int depth)
        {
            if (depth > MaxDepth) throw new MsgPackException($"nested deeper than {MaxDepth}");
            Need(d, at, 1);
            byte b = d[at++];
            if (b <= 0x7f) return (long)b;
            if (b >= 0xe0) return (long)(sbyte)b;
            if ((b & 0xf0) == 0x80) return ReadMap(d, ref at, b & 0x0f, depth);
            if ((b & 0xf0) == 0x90) return ReadArray(d, ref at, b & 0x0f, depth);
            if ((b & 0xe0) == 0xa0) return ReadStr(d, ref at, b & 0x1f);
            switch (b)
            {
                case 0xc0: return null;
                case 0xc2: return false;
                case 0xc3: return true;
                case 0xc4: case 0xc5: case 0xc6:
                {
                    int n = (int)ReadBig(d, ref at, 1 << (b - 0xc4));
                    Need(d, at, n);
                    var bin = new byte[n];
                    Buffer.BlockCopy(d, at, bin, 0, n);
                    at += n;
                    return bin;
                }
                case 0xca: return (double)BitConverter.Int32BitsToSingle((int)ReadBig(d, ref at, 4));
                case 0xcb: return BitConverter.Int64BitsToDouble((long)ReadBig(d, ref at, 8));
                case 0xcc: return (long)ReadBig(d, ref at, 1);
                case 0xcd: return (long)ReadBig(d, ref at, 2);
                case 0xce: return (long)ReadBig(d, ref at, 4);
                case 0xcf: return (long)ReadBig(d, ref at, 8);
                case 0xd0: return (long)(sbyte)ReadBig(d, ref at, 1);
                case 0xd1: return (long)(short)ReadBig(d, ref at, 2);
                case 0xd2: return (long)(int)ReadBig(d, ref at, 4);
                case 0xd3: return (long)ReadBig(d, ref at, 8);
                case 0xd9: case 0xda: case 0xdb: return ReadStr(d, ref at, (int)ReadBig(d, ref at, 1 << (b - 0xd9)));
                case 0xdc: case 0xdd: return ReadArray(d, ref at, (int)ReadBig(d, ref at, 2 << (b - 0xdc)), depth);
                case 0xde: case 0xdf: return ReadMap(d, ref at, (int)ReadBig(d, ref at, 2 << (b - 0xde)), depth);
                default: throw new MsgPackException($"unsupported msgpack type byte 0x{b:x2} at offset {at - 1}");
            }
        }

        static string ReadStr(byte[] d, ref int at, int n)
        {
            Need(d, at, n);
            var s = Encoding.UTF8.GetString(d, at, n);
            at += n;
            return s;
        }

        static List<object> ReadArray(byte[] d, ref int at, int n, int depth)
        {
            Need(d, at, n);  // every element takes at least a byte
            var list = new List<object>(n);
            for (int i = 0; i < n; i++) list.Add(Read(d, ref at, depth + 1));
            return list;
        }

        static Dictionary<string, object> ReadMap(byte[] d, ref int at, int n, int depth)
        {
            Need(d, at, 2L * n);
            var map = new Dictionary<string, object>(n);
            for (int i = 0; i < n; i++)
            {
                var key = Read(d, ref at, depth + 1) as string ?? throw new MsgPackException("a map key that is not a string");
                map[key] = Read(d, ref at, depth + 1);
            }
            return map;
        }
    }
}
