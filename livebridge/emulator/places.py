"""The places the emulator's default model knows: world countries and a few hundred cities.

A run of capitalised words is a place only when it names one of these (or one a scenario adds,
``RuleModel(places=...)``), so a word that opens a sentence ("Trains between Oslo and Lisbon?")
is never taken for one. Common words that are also city names (Nice, Split) are left out.
"""

from __future__ import annotations

_NAMES = """
Aarhus | Abidjan | Abu Dhabi | Accra | Addis Ababa | Adelaide | Afghanistan | Ahmedabad
Albania | Alexandria | Algeria | Algiers | Almaty | Amman | Amsterdam | Anchorage | Andorra
Angola | Ankara | Antalya | Antananarivo | Antigua and Barbuda | Antwerp | Argentina
Armenia | Ashgabat | Astana | Asuncion | Asunción | Athens | Atlanta | Auckland | Austin
Australia | Austria | Azerbaijan | Baghdad | Bahamas | Bahrain | Baku | Bali | Baltimore
Bandung | Bangalore | Bangkok | Bangladesh | Barbados | Barcelona | Basel | Beijing | Beirut
Belarus | Belem | Belfast | Belgium | Belgrade | Belize | Belo Horizonte | Belém | Bengaluru
Benin | Bergen | Berlin | Bern | Bhutan | Bilbao | Birmingham | Bishkek | Bogota | Bogotá
Bolivia | Bologna | Bordeaux | Bosnia and Herzegovina | Boston | Botswana | Brasilia
Brasília | Bratislava | Brazil | Brisbane | Bristol | Brno | Bruges | Brunei | Brussels
Bucharest | Budapest | Buenos Aires | Bulgaria | Burkina Faso | Burundi | Busan | Cabo Verde
Cairo | Calgary | Cali | Cambodia | Cambridge | Cameroon | Canada | Canberra | Cancun
Cancún | Cape Town | Caracas | Cardiff | Cartagena | Casablanca | Cebu
Central African Republic | Chad | Charlotte | Chengdu | Chennai | Chiang Mai | Chicago
Chile | China | Chisinau | Chongqing | Christchurch | Cleveland | Cologne | Colombia
Colombo | Comoros | Congo | Copenhagen | Cordoba | Cork | Costa Rica | Croatia | Cuba
Curitiba | Cusco | Cyprus | Czech Republic | Czechia | Córdoba | Da Nang | Dakar | Dalian
Dallas | Damascus | Dar es Salaam | Darwin | Davao | Delhi | Denmark | Denpasar | Denver
Detroit | Dhaka | Djibouti | Doha | Dominica | Dominican Republic | Dresden | Dubai | Dublin
Dubrovnik | Durban | Dushanbe | Dusseldorf | Düsseldorf | Ecuador | Edinburgh | Edmonton
Egypt | El Salvador | England | Equatorial Guinea | Eritrea | Estonia | Eswatini | Ethiopia
Fez | Fiji | Finland | Florence | Fortaleza | France | Frankfurt | Frankfurt am Main
Fukuoka | Gabon | Gaborone | Gambia | Gdansk | Geneva | Genoa | Georgia | Germany | Ghana
Ghent | Glasgow | Gold Coast | Gothenburg | Granada | Greece | Greenland | Grenada
Guadalajara | Guangzhou | Guatemala | Guatemala City | Guayaquil | Guinea | Guinea-Bissau
Guyana | Haifa | Haiti | Halifax | Hamburg | Hangzhou | Hanoi | Harare | Harbin | Havana
Helsinki | Hiroshima | Ho Chi Minh City | Hobart | Honduras | Hong Kong | Honolulu | Houston
Hungary | Hyderabad | Iceland | Incheon | India | Indonesia | Iran | Iraq | Ireland
Islamabad | Israel | Istanbul | Italy | Ivory Coast | Izmir | Jakarta | Jamaica | Japan
Jeddah | Jerusalem | Jinan | Johannesburg | Jordan | Kabul | Kampala | Kansas City
Kaohsiung | Karachi | Kathmandu | Kazakhstan | Kenya | Khartoum | Kiev | Kigali | Kingston
Kinshasa | Kiribati | Kobe | Kolkata | Kosovo | Krakow | Kraków | Kuala Lumpur | Kuwait
Kuwait City | Kyiv | Kyoto | Kyrgyzstan | La Paz | Lagos | Lahore | Laos | Las Vegas
Latvia | Lausanne | Lebanon | Leeds | Leipzig | Lesotho | Liberia | Libya | Liechtenstein
Lille | Lima | Lisbon | Lithuania | Liverpool | Ljubljana | London | Los Angeles | Luanda
Lusaka | Luxembourg | Luxembourg City | Lyon | Macau | Madagascar | Madrid | Malaga | Malawi
Malaysia | Maldives | Mali | Malmo | Malmö | Malta | Malé | Managua | Manama | Manaus
Manchester | Manila | Maputo | Marrakech | Marrakesh | Marseille | Marshall Islands
Mauritania | Mauritius | Mecca | Medellin | Medellín | Medina | Melbourne | Mendoza | Mexico
Mexico City | Miami | Micronesia | Milan | Minneapolis | Minsk | Mogadishu | Moldova
Monaco | Mongolia | Montenegro | Monterrey | Montevideo | Montreal | Montréal | Morocco
Moscow | Mozambique | Mumbai | Munich | Muscat | Myanmar | Nagoya | Nairobi | Namibia
Nanjing | Nantes | Naples | Nara | Nashville | Nauru | Nepal | Netherlands | New Delhi
New Orleans | New York | New Zealand | Nicaragua | Nicosia | Niger | Nigeria | North Korea
North Macedonia | Norway | Oaxaca | Okinawa | Oman | Orlando | Osaka | Oslo | Ottawa
Oxford | Pakistan | Palau | Palermo | Palestine | Panama | Panama City | Papua New Guinea
Paraguay | Paris | Perth | Peru | Philadelphia | Philippines | Phnom Penh | Phoenix | Phuket
Pittsburgh | Poland | Port Louis | Portland | Porto | Porto Alegre | Portugal | Prague
Pretoria | Puebla | Puerto Rico | Pune | Qatar | Qingdao | Quebec City | Queenstown | Quito
Rabat | Recife | Reykjavik | Riga | Rio de Janeiro | Riyadh | Romania | Rome | Rosario
Rotterdam | Russia | Rwanda | Saint Lucia | Saint Petersburg | Salt Lake City | Salvador
Salzburg | Samoa | San Antonio | San Diego | San Francisco | San Jose | San José | San Juan
San Marino | San Salvador | Santiago | Santo Domingo | Sao Paulo | Sapporo | Sarajevo
Saudi Arabia | Scotland | Seattle | Senegal | Seoul | Serbia | Seville | Seychelles
Shanghai | Shenzhen | Sierra Leone | Singapore | Skopje | Slovakia | Slovenia | Sofia
Solomon Islands | Somalia | South Africa | South Korea | South Sudan | Spain | Sri Lanka
St Louis | St Petersburg | Stockholm | Strasbourg | Stratford-upon-Avon | Stuttgart | Sucre
Sudan | Surabaya | Surat | Suriname | Suzhou | Sweden | Switzerland | Sydney | Syria
São Paulo | Taipei | Taiwan | Tajikistan | Tallinn | Tampa | Tampere | Tanzania | Tashkent
Tbilisi | Tegucigalpa | Tehran | Tel Aviv | Thailand | The Hague | Thessaloniki | Thimphu
Tianjin | Tijuana | Timor-Leste | Tirana | Togo | Tokyo | Tonga | Toronto | Toulouse
Trinidad and Tobago | Tripoli | Tunis | Tunisia | Turin | Turkey | Turkmenistan | Tuvalu
Türkiye | Uganda | Ukraine | Ulaanbaatar | United Arab Emirates | United Kingdom
United States | Uruguay | Utrecht | Uzbekistan | Valencia | Valletta | Valparaiso
Valparaíso | Vancouver | Vanuatu | Vatican City | Venezuela | Venice | Vienna | Vientiane
Vietnam | Vilnius | Wales | Warsaw | Washington | Wellington | Windhoek | Winnipeg | Wroclaw
Wuhan | Xi'an | Yangon | Yemen | Yerevan | Yokohama | Zagreb | Zambia | Zimbabwe | Zurich
Zürich
"""

#: Every known place, as written (the model matches them whatever their case).
PLACES: frozenset[str] = frozenset(
    name.strip() for line in _NAMES.splitlines() for name in line.split("|") if name.strip()
)
